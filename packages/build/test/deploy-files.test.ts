import { spawnSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import { loadConfig, parseDuration } from "@webhooks/core";
import { Deployment } from "kubernetes-models/apps/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ConfigMap, Secret, Service } from "kubernetes-models/v1";
import { describe, expect, test } from "vitest";
import { configMapData, KUBERNETES, kustomizeResources, type Manifest, probes, ROOT, readYaml } from "./manifests.ts";

/**
 * The deployment files, checked offline against the Kubernetes schemas and against the code: the
 * ports and settings they name must be the ones the service uses. (That the probe paths answer is
 * checked on the running compiled build, in compiled-build.test.ts.)
 */
const models: Record<string, new (data: Manifest) => { validate(): void }> = {
  "apps/v1/Deployment": Deployment,
  "v1/ConfigMap": ConfigMap,
  "v1/Secret": Secret,
  "v1/Service": Service,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
};

const configSource = readFile(`${ROOT}packages/core/src/config.ts`, "utf8");
/** Whether the service reads this environment variable (a key of its configuration schema). */
async function isSetting(name: string): Promise<boolean> {
  return new RegExp(`^\\s+${name}: `, "m").test(await configSource);
}

const entrypoint = readFile(`${ROOT}deploy/docker/entrypoint.sh`, "utf8");
/** The roles the image's entry point runs (`api)`, `worker)`, ...). */
async function imageRoles(): Promise<string[]> {
  return [...(await entrypoint).matchAll(/^\s+([a-z]+)\)/gm)].map((match) => match[1]!);
}

describe("the Kubernetes base", () => {
  test("is valid against the Kubernetes schemas, with the example Secret", async () => {
    const resources = await kustomizeResources();
    const secret = await readYaml(`${KUBERNETES}secret.example.yaml`);
    const kinds = [];
    for (const manifest of [...resources.map((resource) => resource.manifest), ...secret]) {
      const model = models[`${manifest.apiVersion}/${manifest.kind}`];
      expect(model, `${manifest.apiVersion} ${manifest.kind}`).toBeDefined();
      new model!(manifest).validate();
      kinds.push(`${manifest.kind}/${manifest.metadata.name}`);
    }
    // The generated ConfigMap, as kustomize makes it.
    new ConfigMap({ metadata: { name: "webhooks" }, data: await configMapData() }).validate();
    expect(kinds).toEqual([
      "Deployment/webhooks-api",
      "Service/webhooks-api",
      "PodDisruptionBudget/webhooks-api",
      "Deployment/webhooks-worker",
      "PodDisruptionBudget/webhooks-worker",
      "Secret/webhooks",
    ]);
  });

  test("the schema check finds a mistake", () => {
    const broken = { apiVersion: "v1", kind: "Service", metadata: { name: "x" }, spec: { ports: [{ port: "80" }] } };
    expect(() => new Service(broken as Manifest).validate()).toThrow(/port/);
  });

  test("probes the API on PORT and the worker on WORKER_METRICS_PORT, every kind of probe", async () => {
    const settings = await configMapData();
    const found = await probes();
    const api = found.filter((probe) => probe.deployment === "webhooks-api");
    const worker = found.filter((probe) => probe.deployment === "webhooks-worker");
    expect(api.map((probe) => `${probe.kind} ${probe.path}`).sort()).toEqual([
      "livenessProbe /healthz",
      "readinessProbe /readyz",
      "startupProbe /healthz",
    ]);
    expect(worker.map((probe) => probe.kind).sort()).toEqual(["livenessProbe", "readinessProbe", "startupProbe"]);
    for (const probe of api) expect(probe.port).toBe(Number(settings.PORT));
    for (const probe of worker) expect(probe.port).toBe(Number(settings.WORKER_METRICS_PORT));
  });

  test("runs roles the image has, with the config and Secret, within limits, past the worker's shutdown", async () => {
    const settings = await configMapData();
    const roles = await imageRoles();
    const resources = await kustomizeResources();
    const deployments = resources.map(({ manifest }) => manifest).filter((manifest) => manifest.kind === "Deployment");
    for (const deployment of deployments) {
      const pod = deployment.spec.template.spec;
      expect(deployment.spec.selector.matchLabels).toEqual(
        Object.fromEntries(Object.entries(deployment.spec.template.metadata.labels)),
      );
      expect(pod.securityContext.runAsNonRoot).toBe(true);
      for (const container of [...pod.initContainers, ...pod.containers]) {
        expect(roles).toContain(container.args[0]);
        expect(container.envFrom).toEqual([
          { configMapRef: { name: "webhooks" } },
          { secretRef: { name: "webhooks" } },
        ]);
        expect(container.resources.requests.memory).toBeDefined();
        expect(container.resources.limits.memory).toBeDefined();
      }
      expect(pod.initContainers.map((container: Manifest) => container.args[0])).toEqual(["migrate"]);
      const annotations = deployment.spec.template.metadata.annotations;
      expect(Number(annotations["prometheus.io/port"])).toBe(pod.containers[0].ports[0].containerPort);
    }
    const worker = deployments.find((deployment) => deployment.metadata.name === "webhooks-worker")!;
    expect(worker.spec.template.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(
      parseDuration(settings.SHUTDOWN_TIMEOUT!)! + 5_000,
    );
    // Each PodDisruptionBudget and the Service select the pods of one Deployment.
    for (const { manifest } of resources) {
      if (manifest.kind !== "PodDisruptionBudget" && manifest.kind !== "Service") continue;
      const selector = manifest.spec.selector.matchLabels ?? manifest.spec.selector;
      const matched = deployments.filter((deployment) =>
        Object.entries(selector).every(([key, value]) => deployment.spec.template.metadata.labels[key] === value),
      );
      expect(matched, manifest.metadata.name).toHaveLength(1);
    }
  });

  test("its settings are the service's and valid, with the Secret's", async () => {
    const settings = await configMapData();
    const [secret] = await readYaml(`${KUBERNETES}secret.example.yaml`);
    for (const name of [...Object.keys(settings), ...Object.keys(secret!.stringData)])
      expect(await isSetting(name), `${name} is not a setting of the service`).toBe(true);
    const config = loadConfig({
      ...settings,
      DATABASE_URL: "postgresql://webhooks:secret@postgres:5432/webhooks",
      REDIS_URL: "redis://redis:6379",
      SECRET_ENCRYPTION_KEY: Buffer.alloc(32, 1).toString("base64"),
    });
    expect(config.env).toBe("production");
  });
});

describe("compose.yaml", () => {
  test("runs PostgreSQL, Redis without eviction, the API and a scalable worker, each once its dependencies are healthy", async () => {
    const [compose] = await readYaml(`${ROOT}compose.yaml`);
    const services = compose!.services as Record<string, Manifest>;
    expect(Object.keys(services).sort()).toEqual(["api", "postgres", "redis", "worker"]);
    expect(services.redis!.command.join(" ")).toContain("--maxmemory-policy noeviction");
    expect(services.postgres!.volumes[0]).toMatch(/^[a-z-]+:\/var\/lib\/postgresql\/data$/);
    for (const name of ["api", "worker"]) {
      const service = services[name]!;
      expect(service.command).toEqual([name]);
      expect(service.depends_on).toEqual({
        postgres: { condition: "service_healthy" },
        redis: { condition: "service_healthy" },
      });
      expect(service.healthcheck.test).toEqual(["CMD", "webhooks", "healthcheck"]);
      expect(service.environment.PORT).toBe("3000");
      expect(service.environment.WORKER_METRICS_PORT).toBe("3001");
    }
    for (const name of ["postgres", "redis"]) expect(services[name]!.healthcheck.test).toBeDefined();
    // Scalable: nothing that two replicas would fight over.
    expect(services.worker!.ports).toBeUndefined();
    expect(services.worker!.container_name).toBeUndefined();
    expect(services.api!.ports).toHaveLength(1);
    expect(services.api!.ports[0]).toMatch(/^\$\{API_PORT:-3000\}:3000$/);
    // The worker's grace period outlasts its default SHUTDOWN_TIMEOUT (30 s).
    expect(parseDuration(services.worker!.stop_grace_period)).toBeGreaterThan(30_000);
  });

  test(".env.example holds what compose.yaml requires, and settings the service knows", async () => {
    const compose = await readFile(`${ROOT}compose.yaml`, "utf8");
    const example = await readFile(`${ROOT}.env.example`, "utf8");
    const required = new Set([...compose.matchAll(/\$\{(\w+):\?/g)].map((match) => match[1]!));
    const interpolated = new Set([...compose.matchAll(/\$\{(\w+)/g)].map((match) => match[1]!));
    const listed = [...example.matchAll(/^#? ?([A-Z_]+)=/gm)].map((match) => match[1]!);
    expect([...required].sort()).toEqual(["POSTGRES_PASSWORD", "SECRET_ENCRYPTION_KEY"]);
    for (const name of required) expect(listed).toContain(name);
    for (const name of listed) {
      if (!interpolated.has(name)) expect(await isSetting(name), `${name} is not a setting of the service`).toBe(true);
    }
  });
});

describe("the Dockerfile", () => {
  test("builds on one base, runs as a non-root user, exposes the default ports, probes, and has the roles", async () => {
    const dockerfile = await readFile(`${ROOT}Dockerfile`, "utf8");
    const bases = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((match) => match[1]);
    expect(bases).toHaveLength(2);
    expect(new Set(bases).size).toBe(1);
    expect(dockerfile).toMatch(/^USER 10001:10001$/m);
    const defaults = loadConfig({});
    expect(dockerfile).toMatch(new RegExp(`^EXPOSE ${defaults.port} ${defaults.worker.metricsPort}$`, "m"));
    expect(dockerfile).toMatch(/^HEALTHCHECK .* CMD \["webhooks", "healthcheck"\]$/m);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["webhooks"\]$/m);
    expect(await imageRoles()).toEqual(["api", "worker", "migrate", "keys", "healthcheck"]);
    const ignored = await readFile(`${ROOT}.dockerignore`, "utf8");
    for (const entry of [".git", "**/node_modules", "**/dist", ".env"]) expect(ignored.split("\n")).toContain(entry);
  });
});

describe("kubectl kustomize", () => {
  const kubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" }).status === 0;
  // kubectl is not a dependency of the project; where it is installed, the base must render.
  test.skipIf(!kubectl)("renders the base: the Deployments, Service, budgets and the generated ConfigMap", () => {
    const rendered = spawnSync("kubectl", ["kustomize", KUBERNETES], { encoding: "utf8" });
    expect(rendered.status, rendered.stderr).toBe(0);
    const kinds = [...rendered.stdout.matchAll(/^kind: (\w+)$/gm)].map((match) => match[1]).sort();
    expect(kinds).toEqual([
      "ConfigMap",
      "Deployment",
      "Deployment",
      "PodDisruptionBudget",
      "PodDisruptionBudget",
      "Service",
    ]);
    // Every Deployment reads the generated ConfigMap under its hashed name.
    const name = /^ {2}name: (webhooks-[a-z0-9]{10})$/m.exec(rendered.stdout)?.[1];
    expect(name).toBeDefined();
    expect(rendered.stdout.split(`name: ${name}`).length - 1).toBe(1 + 4);
  });
});
