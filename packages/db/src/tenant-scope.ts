import { PermissionError } from "@webhooks/core";
import { Prisma, type PrismaClientOrTransaction } from "./client.ts";
import type { SqlClient } from "./sql.ts";

/**
 * Who is asking (docs/api.md#tenant-scoped-api-keys): every tenant's resources (an unscoped API
 * key), or one tenant's (a key scoped to it, or a portal session).
 *
 * The authorisation rule lives here and in the data layer's SQL, not in the routes: every read or
 * write that a route can reach takes a scope as a required argument (TypeScript refuses a call
 * without one) and applies it in its own WHERE clause. A route therefore cannot forget it, and a
 * record of another tenant is simply not found: the same 404 as an id that does not exist, so a
 * scoped credential cannot even tell that the other tenant's id exists. A filter naming another
 * tenant is ANDed with the scope and so matches nothing: an empty list, like an unknown
 * subscription_id.
 */
export type TenantScope = { readonly kind: "unscoped" } | { readonly kind: "tenant"; readonly tenantId: string };

/** What every read or write a route can reach takes: the database, and who is asking. */
export interface ScopedContext {
  db: PrismaClientOrTransaction;
  scope: TenantScope;
}

/** What the lists take: they read through node-postgres directly (paging.ts says why), in the caller's scope. */
export interface ScopedListContext {
  sql: SqlClient;
  scope: TenantScope;
}

export const UNSCOPED: TenantScope = Object.freeze({ kind: "unscoped" });

export function tenantScope(tenantId: string): TenantScope {
  return Object.freeze({ kind: "tenant", tenantId });
}

/** The scope's condition on a table's tenant_id column, for a WHERE clause; none when unscoped. */
export function scopeConditions(scope: TenantScope, column: Prisma.Sql = Prisma.raw("tenant_id")): Prisma.Sql[] {
  return scope.kind === "unscoped" ? [] : [Prisma.sql`${column} = ${scope.tenantId}`];
}

/** The same condition for a Prisma `where`. */
export function scopeWhere(scope: TenantScope): { tenantId?: string } {
  return scope.kind === "unscoped" ? {} : { tenantId: scope.tenantId };
}

/** Whether a record of `tenantId` is visible in the scope (for records read by another module). */
export function isInScope(scope: TenantScope, tenantId: string | null): boolean {
  return scope.kind === "unscoped" || tenantId === scope.tenantId;
}

/**
 * The tenant of a resource created in the scope: a scoped credential creates only for its own
 * tenant (it may name it, or leave it out; naming another is a 403, since nothing of that tenant
 * is being looked up that could be "not found"); an unscoped one for the tenant it names, or none.
 */
export function tenantForNewResource(scope: TenantScope, requested: string | undefined): string | null {
  if (scope.kind === "unscoped") return requested ?? null;
  if (requested !== undefined && requested !== scope.tenantId) {
    throw new PermissionError(
      `This credential is scoped to tenant ${scope.tenantId}; it cannot create resources for another tenant.`,
    );
  }
  return scope.tenantId;
}

/**
 * The operations only an unscoped credential may do: publishing events (a scoped
 * one sends only test events, through POST /v1/subscriptions/{id}/test) and creating portal
 * sessions. Their routes call this first.
 */
export function requireUnscoped(scope: TenantScope, action: string): void {
  if (scope.kind !== "unscoped") {
    throw new PermissionError(
      `This credential is scoped to tenant ${scope.tenantId} and cannot ${action}; use an unscoped API key.`,
    );
  }
}
