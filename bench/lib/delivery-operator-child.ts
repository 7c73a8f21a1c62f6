// The full operator with its delivery stream and health writer, in its own process so the delivery benchmark can read
// its RSS and CPU time from /proc. argv: <kubeconfig> <routingNamespace> <statusTokenFile>. Prints
// "ready <deliveryUrl>" once started; stops on SIGTERM.
import { readFileSync } from 'node:fs';
import pino from 'pino';
import { loadKubeConfig } from '../../src/kube/kubeconfig.ts';
import { startOperator } from '../../src/operator/run.ts';

const [kubeconfigPath, routingNamespace, tokenFile] = process.argv.slice(2);
if (!kubeconfigPath || !routingNamespace || !tokenFile)
  throw new Error('usage: delivery-operator-child.ts <kubeconfig> <routingNamespace> <statusTokenFile>');

const operator = await startOperator({
  kubeConfig: loadKubeConfig(kubeconfigPath),
  routingNamespace,
  httpPort: 0,
  httpHost: '127.0.0.1',
  logger: pino({ level: process.env.BENCH_LOG_LEVEL ?? 'warn' }),
  leaderElection: { enabled: false },
  // As the chart runs them: the stream on every replica, the health writer with its default intervals.
  deliveryStream: { port: 0, host: '127.0.0.1', serviceAccounts: [`${routingNamespace}/byok-gateway`] },
  gatewayStatus: {
    token: readFileSync(tokenFile, 'utf8').trim(),
    service: { namespace: routingNamespace, name: 'byok-gateway', port: 'ops' },
  },
});
process.stdout.write(`ready ${operator.deliveryUrl()}\n`);
process.once('SIGTERM', () => {
  void operator.stop().then(() => process.exit(0));
});
