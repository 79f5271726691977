/** Where a list page starts: at the top, after a record (older ones), or before one (newer ones). */
export interface Cursor {
  starting_after?: string | undefined;
  ending_before?: string | undefined;
}

export const cursorFrom = (query: URLSearchParams): Cursor => ({
  starting_after: query.get("starting_after") ?? undefined,
  ending_before: query.get("ending_before") ?? undefined,
});

/**
 * The newer/older moves from a page (docs/api.md#paging): `has_more` speaks of the direction the
 * page was read in, so a page read backwards (ending_before) always has older records, and one read
 * forwards has newer ones unless it is the first.
 */
export function pageMoves(
  page: { data: { id: string }[]; has_more: boolean },
  cursor: Cursor,
  go: (cursor: Cursor) => void,
): { onNewer: (() => void) | undefined; onOlder: (() => void) | undefined } {
  const backwards = cursor.ending_before !== undefined;
  const first = page.data[0]?.id;
  const last = page.data[page.data.length - 1]?.id;
  const hasNewer = backwards ? page.has_more : cursor.starting_after !== undefined;
  const hasOlder = backwards ? true : page.has_more;
  return {
    onNewer: hasNewer ? () => go(first ? { ending_before: first } : {}) : undefined,
    onOlder: hasOlder ? () => go(last ? { starting_after: last } : {}) : undefined,
  };
}
