// The rules the API server applies to a status write of a Job whose
// spec.managedBy names another controller (kube-apiserver's Job status
// strategy with every Reject… option on, as for managedBy Jobs since 1.32).
// The fake queue enforces them, so a write-back that the real peer would
// answer with 422 fails in unit tests too.
import type { V1Job, V1JobCondition, V1JobStatus } from '@kubernetes/client-node';

const isTrue = (conditions: V1JobCondition[] | undefined, type: string) => conditions?.some((c) => c.type === type && c.status === 'True') ?? false;
const time = (t: Date | string | undefined) => (t === undefined ? undefined : new Date(t).getTime());

/** What the API server would refuse in writing `next` over the status of `job`; empty when it would accept it. */
export function jobStatusProblems(job: V1Job, next: V1JobStatus): string[] {
  const old = job.status ?? {};
  const c = next.conditions;
  const complete = isTrue(c, 'Complete');
  const failed = isTrue(c, 'Failed');
  const finished = complete || failed;
  const problems: string[] = [];
  const rule = (broken: boolean, message: string) => broken && problems.push(message);
  rule(complete && failed, 'cannot set Complete=True and Failed=true conditions');
  rule(complete && isTrue(c, 'FailureTarget'), 'cannot set Complete=True and FailureTarget=true conditions');
  rule(next.completionTime !== undefined && !complete, 'cannot set completionTime when there is no Complete=True condition');
  rule(complete && next.completionTime === undefined, 'completionTime is required for Complete jobs');
  const start = time(next.startTime);
  const end = time(next.completionTime);
  rule(start !== undefined && end !== undefined && end < start, 'completionTime cannot be set before startTime');
  rule(failed && !isTrue(c, 'FailureTarget'), 'cannot set Failed=True condition without the FailureTarget=true condition');
  rule(complete && !isTrue(c, 'SuccessCriteriaMet'), 'cannot set Complete=True condition without the SuccessCriteriaMet=true condition');
  rule(finished && (next.active ?? 0) > 0, 'active>0 is invalid for finished job');
  rule(finished && next.startTime === undefined, 'startTime is required for finished job');
  rule(finished && (next.terminating ?? 0) > 0, 'terminating>0 is invalid for finished job');
  rule((next.ready ?? 0) > (next.active ?? 0), 'cannot set more ready pods than active');
  rule(isTrue(c, 'SuccessCriteriaMet') && failed, 'cannot set SuccessCriteriaMet=True and Failed=true conditions');
  rule(isTrue(c, 'SuccessCriteriaMet') && isTrue(c, 'FailureTarget'), 'cannot set SuccessCriteriaMet=True and FailureTarget=true conditions');
  for (const type of ['Failed', 'Complete', 'FailureTarget', 'SuccessCriteriaMet']) {
    rule(isTrue(old.conditions, type) && !isTrue(c, type), `cannot disable the terminal ${type}=True condition`);
  }
  rule((next.failed ?? 0) < (old.failed ?? 0), 'cannot decrease the failed counter');
  rule((next.succeeded ?? 0) < (old.succeeded ?? 0), 'cannot decrease the succeeded counter');
  rule(old.completionTime !== undefined && end !== undefined && end !== time(old.completionTime), 'completionTime cannot be mutated');
  rule(old.startTime !== undefined && start !== time(old.startTime) && !job.spec?.suspend, 'startTime cannot be removed for unsuspended job');
  rule(isTrue(old.conditions, 'Complete') && !isTrue(old.conditions, 'SuccessCriteriaMet') && isTrue(c, 'SuccessCriteriaMet'), 'cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions');
  return problems;
}
