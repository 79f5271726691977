import { CursorError, type IdKind, isId } from "@webhooks/core";
import { Prisma } from "./client.ts";
import type { SqlClient } from "./sql.ts";

/**
 * Cursor paging over `(created_at desc, id desc)` (docs/api.md#paging). A cursor is the id of a
 * record the caller already has; the page continues strictly after it (`startingAfter`, older
 * records) or strictly before it (`endingBefore`, newer records). Row-value comparisons keep the
 * query an index range scan however deep the page, and ties on created_at are broken by id, so no
 * record is skipped or repeated even when many share the same millisecond.
 */
export interface PageRequest {
  limit: number;
  startingAfter?: string | undefined;
  endingBefore?: string | undefined;
}

export interface Page<T> {
  data: T[];
  hasMore: boolean;
}

export interface PageQuery {
  /** A fixed table name (never user input). */
  table: "deliveries" | "subscriptions" | "delivery_attempt_log";
  /** The column that orders the list, newest first. */
  timeColumn: "created_at" | "started_at";
  columns: Prisma.Sql;
  filters: Prisma.Sql[];
  /** The kind of record listed, for cursor checks and error messages. */
  resource: IdKind;
  /**
   * Conditions the cursor's own record must meet: the caller's tenant scope (tenant-scope.ts), so
   * that another tenant's id is as unknown as a missing one and answers the same 400.
   */
  cursorScope?: Prisma.Sql[];
}

/** The conditions a cursor's own record must meet: its id, and the scope it must be in. */
function cursorConditions(query: PageQuery, cursorId: string): Prisma.Sql {
  return Prisma.join([Prisma.sql`id = ${cursorId}`, ...(query.cursorScope ?? [])], " AND ");
}

/**
 * The statement that reads one page (limit + 1 rows, to know has_more), without the cursor's
 * existence check. Exported so that tests can EXPLAIN exactly what the lists run.
 */
export function pageStatement(query: PageQuery, page: PageRequest): Prisma.Sql {
  const table = Prisma.raw(`"${query.table}"`);
  const time = Prisma.raw(`"${query.timeColumn}"`);
  const filters = [...query.filters];
  const cursorId = page.startingAfter ?? page.endingBefore;
  const backwards = page.endingBefore !== undefined;
  if (cursorId !== undefined) {
    const cursor = Prisma.sql`(SELECT ${time}, id FROM ${table} WHERE ${cursorConditions(query, cursorId)})`;
    filters.push(backwards ? Prisma.sql`(${time}, id) > ${cursor}` : Prisma.sql`(${time}, id) < ${cursor}`);
  }
  const where = filters.length > 0 ? Prisma.sql`WHERE ${Prisma.join(filters, " AND ")}` : Prisma.empty;
  const direction = Prisma.raw(backwards ? "ASC" : "DESC");
  return Prisma.sql`
    SELECT ${query.columns} FROM ${table} ${where}
    ORDER BY ${time} ${direction}, id ${direction}
    LIMIT ${page.limit + 1}`;
}

/**
 * The one statement fetchPage runs for a page: pageStatement, and with a cursor, whether the
 * cursor's record exists, in the same round trip (an empty page and an unknown cursor both find
 * no rows, so the existence check rides along as a column, `cursorFound`). Exported so that the
 * benchmark can EXPLAIN exactly what a list request runs.
 */
export function pageWithCursorCheck(query: PageQuery, page: PageRequest): Prisma.Sql {
  const statement = pageStatement(query, page);
  const cursorId = page.startingAfter ?? page.endingBefore;
  if (cursorId === undefined) return statement;
  const table = Prisma.raw(`"${query.table}"`);
  return Prisma.sql`
    SELECT cursor.found AS "cursorFound", page.*
    FROM (SELECT EXISTS (SELECT 1 FROM ${table} WHERE ${cursorConditions(query, cursorId)}) AS found) AS cursor
    LEFT JOIN LATERAL (${statement}) AS page ON true`;
}

/**
 * Reads a page. The statement runs on node-postgres directly, not through Prisma's $queryRaw:
 * Prisma's client was a large share of the API's CPU per list request. The statement is still built
 * with Prisma.sql, so its values are bound as parameters ($1, $2, ...), never spliced into the
 * text.
 */
export async function fetchPage<Row extends object>(
  sql: SqlClient,
  query: PageQuery,
  page: PageRequest,
): Promise<Page<Row>> {
  if (page.startingAfter !== undefined && page.endingBefore !== undefined) {
    throw new CursorError("both_cursors", "endingBefore", query.resource, page.endingBefore);
  }
  const cursorId = page.startingAfter ?? page.endingBefore;
  const backwards = page.endingBefore !== undefined;
  const missingCursor = () =>
    new CursorError("unknown_cursor", backwards ? "endingBefore" : "startingAfter", query.resource, cursorId ?? "");
  if (cursorId !== undefined && !isId(query.resource, cursorId)) throw missingCursor();
  const statement = pageWithCursorCheck(query, page);

  let rows: Row[];
  if (cursorId === undefined) {
    rows = await sql.query<Row>(statement.text, statement.values);
  } else {
    const withCursor = await sql.query<Row & { cursorFound: boolean; id: string | null }>(
      statement.text,
      statement.values,
    );
    if (!withCursor[0]?.cursorFound) throw missingCursor();
    rows = withCursor.filter((row) => row.id !== null).map(({ cursorFound: _, ...row }) => row as unknown as Row);
  }

  const hasMore = rows.length > page.limit;
  const data = rows.slice(0, page.limit);
  // ending_before walks towards newer records; the page is still shown newest first.
  if (backwards) data.reverse();
  return { data, hasMore };
}
