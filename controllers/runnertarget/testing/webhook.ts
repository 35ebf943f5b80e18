// A workflow_job webhook payload as GitHub sends it (the fields the tests vary, and some they do not).
export const workflowJobPayload = (over: { action?: string; labels?: string[]; repo?: string } = {}) => ({
  action: over.action ?? 'queued',
  workflow_job: { id: 9001, run_id: 77, run_attempt: 1, status: over.action ?? 'queued', labels: over.labels ?? ['self-hosted', 'linux'], runner_id: null, name: 'build' },
  repository: { id: 1, full_name: over.repo ?? 'swack-tools/oxidex', owner: { login: 'swack-tools' } },
  organization: { login: 'swack-tools' },
  sender: { login: 'octocat' },
});
