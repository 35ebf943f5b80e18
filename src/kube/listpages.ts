// One whole list of a resource, read page by page: each item checked and
// transformed on intake, and counted against the informer's budget as it
// arrives, since every page is held until the last one has come.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { HoldBudget } from './holdbudget.js';
import { InputLimitError, type ListPage } from './listwatch.js';
import type { ObjectIntake } from './objectintake.js';
import { objectKey } from './resource.js';

/** A list with more pages than this is refused: 1,000 pages of 500 objects is far beyond any cluster we serve, and a server that hands out `continue` tokens forever must not keep us listing. */
export const MAX_LIST_PAGES = 1000;

export interface ListRead<T> {
  path: string;
  selectors: Record<string, string>;
  pageSize: number;
  maxPages: number;
  fetch(query: Record<string, string>): Promise<ListPage<T>>;
  intake: ObjectIntake<T>;
  budget?: HoldBudget | undefined;
}

export async function readList<T extends KubernetesObject>(r: ListRead<T>): Promise<{ items: T[]; resourceVersion: string }> {
  const items: T[] = [];
  let resourceVersion = '';
  let cont: string | undefined;
  let pages = 0;
  r.budget?.beginList();
  try {
    do {
      if (++pages > r.maxPages) {
        throw new InputLimitError('too_many_pages', `a list of ${r.path} still had more pages after ${r.maxPages}, the limit on pages per list; the list was dropped`);
      }
      const query: Record<string, string> = { ...r.selectors, limit: String(r.pageSize) };
      if (cont) query.continue = cont;
      const page = await r.fetch(query);
      const itemKind = page.kind?.endsWith('List') ? page.kind.slice(0, -4) : undefined;
      r.budget?.checkPage(page.items.length, r.pageSize);
      for (const item of page.items) {
        const object = r.intake.admit(item, (o) => {
          // Items of a built-in list come without kind and apiVersion; fill them in so logs and handlers can rely on them.
          if (!o.kind && itemKind) o.kind = itemKind;
          if (!o.apiVersion && page.apiVersion) o.apiVersion = page.apiVersion;
        });
        if (!object) continue;
        r.budget?.listed(objectKey(object), object);
        items.push(object);
      }
      resourceVersion = page.resourceVersion;
      cont = page.continue;
    } while (cont);
  } catch (err) {
    r.budget?.abandonList();
    throw err;
  }
  r.budget?.endList();
  return { items, resourceVersion };
}
