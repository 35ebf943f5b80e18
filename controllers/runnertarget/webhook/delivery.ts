// What a webhook delivery says, once its signature is checked: a
// workflow_job event parsed with zod (only the fields the controller uses,
// bounded), and the RunnerTargets whose runners could take that job. The
// delivery only names targets to check sooner; the check reads GitHub itself.
import { z } from 'zod';
import type { RunnerTarget } from '../../../src/api/index.js';
import { jobFits } from '../policy/demand.js';

const login = z.string().min(1).max(39);

export const WorkflowJobDeliverySchema = z.object({
  action: z.string().min(1).max(32),
  workflow_job: z.object({
    id: z.number().int().nonnegative(),
    run_id: z.number().int().nonnegative(),
    status: z.string().max(32),
    labels: z.array(z.string().max(256)).max(100),
  }),
  repository: z.object({ full_name: z.string().min(3).max(140), owner: z.object({ login }) }),
  organization: z.object({ login }).optional(),
});
export type WorkflowJobDelivery = z.infer<typeof WorkflowJobDeliverySchema>;

/** Parses a workflow_job payload; a readable error naming the first bad field when it is not one. */
export function parseWorkflowJob(json: unknown): { ok: true; delivery: WorkflowJobDelivery } | { ok: false; error: string } {
  const r = WorkflowJobDeliverySchema.safeParse(json);
  if (r.success) return { ok: true, delivery: r.data };
  const issue = r.error.issues[0]!;
  return { ok: false, error: `not a workflow_job payload: ${issue.path.join('.') || '(body)'}: ${issue.message}` };
}

/**
 * The targets a queued job asks a check of: they follow its repository and
 * their runners have every label it asks for (the rule the check's demand
 * counts by). Other actions ask for nothing: the periodic check sees runs
 * start and end.
 */
export function targetsForJob(delivery: WorkflowJobDelivery, targets: readonly RunnerTarget[]): RunnerTarget[] {
  if (delivery.action !== 'queued') return [];
  const job = { id: delivery.workflow_job.id, repository: delivery.repository.full_name, status: 'queued' as const, labels: delivery.workflow_job.labels };
  return targets.filter((t) => !t.metadata?.deletionTimestamp && jobFits(job, t.spec.github));
}
