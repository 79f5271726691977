import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

/** The deployment files as data, for the tests that hold them to the code. */
export const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
export const KUBERNETES = `${ROOT}deploy/kubernetes/`;

/** A manifest as parsed: the tests check it against its schema, not against a type. */
export type Manifest = Record<string, any>;

/** Every document of a YAML file, `<<` merge keys applied (compose.yaml has them); a syntax error fails the test. */
export async function readYaml(path: string): Promise<Manifest[]> {
  const documents = parseAllDocuments(await readFile(path, "utf8"), { merge: true });
  for (const document of documents) {
    if (document.errors.length > 0) throw new Error(`${path}: ${document.errors.map((e) => e.message).join("; ")}`);
  }
  return documents.map((document) => document.toJS() as Manifest);
}

/** The kustomize base's resources, in its order. */
export async function kustomizeResources(): Promise<{ file: string; manifest: Manifest }[]> {
  const [kustomization] = await readYaml(`${KUBERNETES}kustomization.yaml`);
  const resources: { file: string; manifest: Manifest }[] = [];
  for (const file of kustomization!.resources as string[]) {
    for (const manifest of await readYaml(`${KUBERNETES}${file}`)) resources.push({ file, manifest });
  }
  return resources;
}

export interface Probe {
  deployment: string;
  container: string;
  kind: "readinessProbe" | "livenessProbe" | "startupProbe";
  path: string;
  /** The container port it names, resolved to a number. */
  port: number;
}

/** Every HTTP probe of the base's Deployments, with its port resolved from the container's ports. */
export async function probes(): Promise<Probe[]> {
  const found: Probe[] = [];
  for (const { manifest } of await kustomizeResources()) {
    if (manifest.kind !== "Deployment") continue;
    for (const container of manifest.spec.template.spec.containers) {
      for (const kind of ["readinessProbe", "livenessProbe", "startupProbe"] as const) {
        const probe = container[kind];
        if (!probe) continue;
        const named = (container.ports ?? []).find((port: Manifest) => port.name === probe.httpGet.port);
        found.push({
          deployment: manifest.metadata.name,
          container: container.name,
          kind,
          path: probe.httpGet.path,
          port: typeof probe.httpGet.port === "number" ? probe.httpGet.port : named?.containerPort,
        });
      }
    }
  }
  return found;
}

/** The settings of the ConfigMap that the base generates (from config.env: KEY=value lines, # comments). */
export async function configMapData(): Promise<Record<string, string>> {
  const [kustomization] = await readYaml(`${KUBERNETES}kustomization.yaml`);
  const [generator] = kustomization!.configMapGenerator as { name: string; envs: string[] }[];
  const settings: Record<string, string> = {};
  for (const file of generator!.envs) {
    for (const line of (await readFile(`${KUBERNETES}${file}`, "utf8")).split("\n")) {
      const match = /^([A-Z_]+)=(.*)$/.exec(line);
      if (match) settings[match[1]!] = match[2]!;
      else if (line.trim() !== "" && !line.startsWith("#")) throw new Error(`${file}: cannot read "${line}"`);
    }
  }
  return settings;
}
