export interface Shard {
  seconds: number;
  paths: string[];
}
export function weigh(paths: string[], seconds?: Record<string, number>): { path: string; seconds: number }[];
export function deal(paths: string[], count: number, seconds?: Record<string, number>): Shard[];
declare const BalancedSequencer: unknown;
export default BalancedSequencer;
