// Preloaded (`node --import`) into a process that bench/gateway-gc.ts measures, so the gateway and the bare fastify
// peer are measured the same way. Over IPC: 'gc-start' runs a full GC, then turns V8's --trace-gc-nvp on (one line
// per GC on stdout: allocated, new_space_survived, promoted bytes, pause ms) and starts the CPU clock; 'gc-stop'
// reads the clock, forces one scavenge (so the last line counts what was allocated since the previous GC), turns
// tracing off and answers with the CPU used; 'gc-exit' exits normally, which flushes stdout for the parent.
// Needs --expose-gc.
import v8 from 'node:v8';

type Gc = (opts?: { type: 'minor' | 'major'; execution?: 'sync' }) => void;
const gc = (globalThis as { gc?: Gc }).gc;

if (process.send && gc) {
  let cpu0 = process.cpuUsage();
  process.on('message', (msg: unknown) => {
    if (msg === 'gc-start') {
      gc({ type: 'major', execution: 'sync' });
      v8.setFlagsFromString('--trace-gc-nvp');
      cpu0 = process.cpuUsage();
      process.send!('gc-started');
    } else if (msg === 'gc-stop') {
      const cpu = process.cpuUsage(cpu0);
      // Marks the end of the window in the trace: bytes, not its pause, are counted (the parent drops its pause).
      gc({ type: 'minor', execution: 'sync' });
      v8.setFlagsFromString('--no-trace-gc-nvp');
      process.send!({ cpuUs: cpu.user + cpu.system });
    } else if (msg === 'gc-exit') process.exit(0);
  });
  // Outlives the measured role's own lifetime rules: the parent decides when this process ends.
  process.channel?.ref();
}
