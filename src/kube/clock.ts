// The one place code outside the work queue takes its clock and its sleep
// from. The bodies still live in workqueue.ts, which is being changed on
// another branch; once that lands they move here and workqueue.ts imports
// them, with no caller having to change.
export { realClock, sleep, unrefClock, type Clock } from './workqueue.js';
