// Runs the full operator in its own process so the benchmark can read its peak RSS (VmHWM) cleanly.
// argv: <kubeconfig> <routingNamespace>. Prints "ready" once started; stops on SIGTERM.
import pino from 'pino';
import { loadKubeConfig } from '../../src/kube/client.ts';
import { startOperator } from '../../src/operator/run.ts';

const [kubeconfigPath, routingNamespace] = process.argv.slice(2);
if (!kubeconfigPath || !routingNamespace) throw new Error('usage: operator-child.ts <kubeconfig> <routingNamespace>');

const operator = await startOperator({
  kubeConfig: loadKubeConfig(kubeconfigPath),
  routingNamespace,
  httpPort: 0,
  httpHost: '127.0.0.1',
  logger: pino({ level: process.env.BENCH_LOG_LEVEL ?? 'warn' }),
});
process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void operator.stop().finally(() => process.exit(0));
});
