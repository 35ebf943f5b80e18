// Running a command-line tool of a test cluster (kubectl, helm) to its end,
// with its output and exit code; and the kubectl call shape the cluster
// builder and the e2e tests share.
import { spawn } from 'node:child_process';

export interface Kubectl {
  (args: string[], input?: string): Promise<{ stdout: string; stderr: string; code: number }>;
}

export function runTool(bin: string, args: string[], input?: string): Promise<{ stdout: string; stderr: string; code: number }> {
  return new Promise((resolve, reject) => {
    // No input: stdin is /dev/null, so there is no pipe for a tool that exits first to break.
    const child = spawn(bin, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ stdout, stderr, code: code ?? -1 }));
    if (input === undefined) return;
    // A tool that fails before reading all of its input closes the pipe (EPIPE): its exit code and output say why.
    child.stdin!.on('error', () => {});
    child.stdin!.end(input);
  });
}
