export default async function globalTeardown() {
  await globalThis.__leaseholdCP?.stop();
}
