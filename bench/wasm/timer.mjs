// The Node side of timer.py (see there for why native processes are timed
// through it): start it while the process holds little memory, then
// `await timer.time(argv)` gives a command's wall time in seconds.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** Starts timer.py; returns `{ time(argv), close() }`. */
export function startTimer() {
  const child = spawn('python3', [fileURLToPath(new URL('./timer.py', import.meta.url))], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const replies = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    /**
     * Runs `argv` once (output to /dev/null, or with `{ drain: true }` to a pipe
     * that timer.py empties); its wall time in seconds. Throws if it failed.
     */
    async time(argv, { drain = false } = {}) {
      child.stdin.write(`${JSON.stringify(drain ? { argv, drain } : argv)}\n`);
      const { value, done } = await replies.next();
      if (done) throw new Error('timer.py ended');
      if (value.startsWith('error')) throw new Error(value);
      return Number(value);
    },
    /** Ends timer.py. */
    close() {
      child.stdin.end();
    },
  };
}
