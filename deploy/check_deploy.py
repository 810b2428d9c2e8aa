#!/usr/bin/env python3
"""Consistency checks of the deployment files that schema validation cannot see.

Run by scripts/check-deploy.sh (which validates the schemas with docker-compose and
kubernetes-validate first) with the Python of its virtual environment (PyYAML). Prints one
line per problem to stderr; the last line of stdout is a short summary of what was checked.
Exit status: 0 when there is no problem, 1 otherwise.

    check_deploy.py --compose-config RENDERED.yml --compose-monitoring-config RENDERED.yml
        --compose-tracing-config RENDERED.yml
        --kubernetes DIR --dockerfile FILE --prometheus DIR --grafana DASHBOARD.json
        --sources DIR --docs DEPLOYMENT.md --dashboard-rules OUT.yaml

--dashboard-rules names a file it writes: the dashboard's queries as recording rules, for
`promtool check rules` to parse (scripts/check-deploy.sh runs it, and promtool on alerts.yaml).
"""
import argparse
import glob
import json
import os
import re
import sys

import yaml

RPC_SERVICES = {  # name -> (port variable, addresses variable, default port)
    "identity": ("AUTH_IDENTITY_PORT", "AUTH_IDENTITY_ADDRESSES", 7101),
    "otp-dispatch": ("AUTH_OTP_PORT", "AUTH_OTP_ADDRESSES", 7102),
    "session": ("AUTH_SESSION_PORT", "AUTH_SESSION_ADDRESSES", 7103),
}
GATEWAY_PORT = 8080
OUR_SERVICES = set(RPC_SERVICES) | {"gateway"}
# GET /metrics of each service (docs/deployment.md, "What operators watch"): name -> (port
# variable, port). The Prometheus jobs are named after the services.
METRICS_PORTS = {
    "gateway": ("AUTH_GATEWAY_ADMIN_PORT", 9100),
    "identity": ("AUTH_IDENTITY_METRICS_PORT", 9101),
    "otp-dispatch": ("AUTH_OTP_METRICS_PORT", 9102),
    "session": ("AUTH_SESSION_METRICS_PORT", 9103),
}
# Compose services of the optional `monitoring` profile.
# Optional services, each only in its compose profile.
OPTIONAL_SERVICES = {"prometheus": "monitoring", "jaeger": "tracing"}
MONITORING_SERVICES = set(OPTIONAL_SERVICES)
# Secrets each service reads from the environment (the rest of the configuration is not secret;
# RPC authenticates with mutual TLS, each service's certificate and key mounted as files).
SECRETS = {
    "identity": {"AUTH_DATABASE_URL"},
    "otp-dispatch": {"AUTH_DATABASE_URL", "AUTH_OTP_SECRET", "AUTH_OTP_WEBHOOK_SECRET"},
    "session": {"AUTH_DATABASE_URL", "AUTH_MASTER_KEY"},
    "gateway": set(),
}
TLS_VARIABLES = ("AUTH_RPC_TLS_CERT", "AUTH_RPC_TLS_KEY", "AUTH_RPC_TLS_CA")
# Callers that need a certificate: the services, and operators' authctl.
CERTIFICATE_NAMES = OUR_SERVICES | {"authctl"}

problems = []


def problem(where, text):
    problems.append(f"{where}: {text}")


def target_port(command):
    """The port of `authctl health --target 127.0.0.1:PORT` in a probe/healthcheck command."""
    text = " ".join(str(part) for part in command)
    match = re.search(r"authctl health --target 127\.0\.0\.1:(\d+)", text)
    return int(match.group(1)) if match else None


def subset(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


# --- docker-compose ---------------------------------------------------------------------------
def check_compose(path):
    where = "docker-compose.yml"
    with open(path) as f:
        config = yaml.safe_load(f)
    services = config.get("services") or {}
    expected = OUR_SERVICES | {"postgres"}
    # Docker Compose v2 leaves services of profiles not asked for out of `config`; v1 does not.
    if not expected <= set(services) <= expected | MONITORING_SERVICES:
        problem(where, f"services are {sorted(services)}, expected {sorted(expected)} (and {sorted(MONITORING_SERVICES)})")
    for name in MONITORING_SERVICES & set(services):
        profile = OPTIONAL_SERVICES[name]
        if services[name].get("profiles") != [profile]:
            problem(where, f"{name}: not only in the {profile} profile (profiles: [{profile}])")
    for name, service in services.items():
        if service.get("restart") not in ("always", "unless-stopped", "on-failure"):
            problem(where, f"{name}: no restart policy")
        if not (service.get("deploy", {}).get("resources", {}).get("limits", {}).get("memory")):
            problem(where, f"{name}: no memory limit (deploy.resources.limits.memory)")
        if not service.get("healthcheck", {}).get("test"):
            problem(where, f"{name}: no healthcheck")
        if name in MONITORING_SERVICES:
            if any(published_host_ip(p) != "127.0.0.1" for p in service.get("ports", [])):
                problem(where, f"{name}: publishes a port beyond the host's loopback (it has no authentication)")
        elif name != "gateway" and service.get("ports"):
            problem(where, f"{name}: publishes ports; only the gateway may")
    postgres = services.get("postgres", {})
    if not any(str(v).split(":")[0] in (config.get("volumes") or {}) for v in postgres.get("volumes", [])
               if not isinstance(v, dict)) and not any(
               isinstance(v, dict) and v.get("type") == "volume" for v in postgres.get("volumes", [])):
        problem(where, "postgres: data is not on a named volume")
    if "pg_isready" not in " ".join(map(str, postgres.get("healthcheck", {}).get("test", []))):
        problem(where, "postgres: healthcheck is not pg_isready")

    for name in OUR_SERVICES & set(services):
        service = services[name]
        env = service.get("environment") or {}
        if isinstance(env, list):
            env = dict(item.split("=", 1) for item in env)
        if env.get("AUTH_ENVIRONMENT") != "production":
            problem(where, f"{name}: AUTH_ENVIRONMENT is not production")
        if env.get("AUTH_BIND_HOST") != "0.0.0.0":
            problem(where, f"{name}: AUTH_BIND_HOST is not 0.0.0.0")
        if env.get("AUTH_RPC_SECRET") or env.get("AUTH_RPC_MESH_MTLS"):
            problem(where, f"{name}: sets AUTH_RPC_SECRET/AUTH_RPC_MESH_MTLS; RPC uses mutual TLS")
        mounted = {s.get("target") if isinstance(s, dict) else s: s.get("source") if isinstance(s, dict) else s
                   for s in service.get("secrets", [])}
        for variable in TLS_VARIABLES:
            path = str(env.get(variable, ""))
            if not path.startswith("/run/secrets/") or path[len("/run/secrets/"):] not in mounted:
                problem(where, f"{name}: {variable} is not a file of a mounted compose secret")
        cert_source = mounted.get(str(env.get("AUTH_RPC_TLS_CERT", "")).removeprefix("/run/secrets/"), "")
        cert_file = str((config.get("secrets") or {}).get(cert_source, {}).get("file", ""))
        if not cert_file.endswith(f"/{name}.pem"):
            problem(where, f"{name}: its certificate is {cert_file or cert_source!r}, not {name}.pem (the name it proves)")
        if name == "otp-dispatch":
            for variable in ("AUTH_OTP_SMS_PROVIDER", "AUTH_OTP_EMAIL_PROVIDER"):
                if env.get(variable, "log") == "log":
                    problem(where, f"{name}: {variable} is log (or unset); production refuses it")
        for secret in SECRETS[name]:
            if secret == "AUTH_DATABASE_URL":
                if "host=postgres" not in str(env.get(secret, "")):
                    problem(where, f"{name}: AUTH_DATABASE_URL does not point at the postgres service")
            elif not env.get(secret):
                problem(where, f"{name}: {secret} is not set")
        for other, (_, addresses_variable, port) in RPC_SERVICES.items():
            if env.get(addresses_variable) != f"{other}:{port}":
                problem(where, f"{name}: {addresses_variable} is {env.get(addresses_variable)!r}, expected {other}:{port}")
        if service.get("stop_signal", "SIGTERM") != "SIGTERM":
            problem(where, f"{name}: stop_signal is not SIGTERM")
        metrics_variable, metrics_port = METRICS_PORTS[name]
        if str(env.get(metrics_variable)) != str(metrics_port):
            problem(where, f"{name}: {metrics_variable} is {env.get(metrics_variable)!r}, expected {metrics_port}")
        if str(metrics_port) not in [str(port).split("/")[0] for port in service.get("expose", [])]:
            problem(where, f"{name}: does not expose its metrics port {metrics_port} on the compose network")
        if name in RPC_SERVICES:
            port_variable, _, port = RPC_SERVICES[name]
            if str(env.get(port_variable, port)) != str(port):
                problem(where, f"{name}: {port_variable} is not {port}")
            if target_port(service.get("healthcheck", {}).get("test", [])) != port:
                problem(where, f"{name}: healthcheck does not run authctl health against port {port}")
            if service.get("depends_on", {}).get("postgres", {}).get("condition") != "service_healthy":
                problem(where, f"{name}: does not wait for a healthy postgres")
    gateway = services.get("gateway", {})
    for name in RPC_SERVICES:
        if gateway.get("depends_on", {}).get(name, {}).get("condition") != "service_healthy":
            problem(where, f"gateway: does not wait for a healthy {name}")
    if "/health/live" not in " ".join(map(str, gateway.get("healthcheck", {}).get("test", []))):
        problem(where, "gateway: healthcheck does not call /health/live")
    if not any(str(p.get("target") if isinstance(p, dict) else p).endswith(str(GATEWAY_PORT))
               for p in gateway.get("ports", [])):
        problem(where, f"gateway: port {GATEWAY_PORT} is not published")
    return len(services)


def published_host_ip(port):
    """The host address a compose `ports` entry binds ("" for every address)."""
    if isinstance(port, dict):
        return port.get("host_ip", "")
    parts = str(port).split(":")
    return parts[0] if len(parts) == 3 else ""


def check_compose_tracing(path):
    """The `tracing` profile (`docker-compose --profile tracing config`): Jaeger receiving OTLP
    over HTTP on the compose network, and every service of ours told the collector's URL
    through OTEL_EXPORTER_OTLP_ENDPOINT (empty by default: no traces)."""
    where = "docker-compose.yml (--profile tracing)"
    with open(path) as f:
        services = (yaml.safe_load(f) or {}).get("services") or {}
    jaeger = services.get("jaeger")
    if not jaeger:
        problem(where, "no jaeger service")
        return
    if "4318" not in [str(port) for port in jaeger.get("expose", [])]:
        problem(where, "jaeger: does not expose OTLP/HTTP (4318) on the compose network")
    for name in OUR_SERVICES:
        environment = (services.get(name) or {}).get("environment") or {}
        if "OTEL_EXPORTER_OTLP_ENDPOINT" not in environment:
            problem(where, f"{name}: OTEL_EXPORTER_OTLP_ENDPOINT is not passed through")


def check_compose_monitoring(path, prometheus_directory):
    """The `monitoring` profile (`docker-compose --profile monitoring config`): Prometheus with
    deploy/prometheus mounted, scraping every service's metrics port on the compose network."""
    where = "docker-compose.yml (--profile monitoring)"
    with open(path) as f:
        services = (yaml.safe_load(f) or {}).get("services") or {}
    prometheus = services.get("prometheus")
    if not prometheus:
        problem(where, "no prometheus service")
        return
    if not str(prometheus.get("image", "")).startswith("prom/prometheus:"):
        problem(where, f"prometheus: image {prometheus.get('image')!r} is not prom/prometheus:<version>")
    mounts = {}
    for volume in prometheus.get("volumes", []):
        if isinstance(volume, dict):
            mounts[volume.get("target")] = str(volume.get("source", ""))
        else:
            parts = str(volume).split(":")
            if len(parts) >= 2:
                mounts[parts[1]] = parts[0]
    if not mounts.get("/etc/prometheus", "").rstrip("/").endswith("deploy/prometheus"):
        problem(where, "prometheus: deploy/prometheus is not mounted at /etc/prometheus")
    with open(os.path.join(prometheus_directory, "prometheus.yml")) as f:
        scrape = yaml.safe_load(f) or {}
    if "alerts.yaml" not in (scrape.get("rule_files") or []):
        problem("deploy/prometheus/prometheus.yml", "rule_files does not name alerts.yaml")
    jobs = {job.get("job_name"): [t for c in job.get("static_configs", []) for t in c.get("targets", [])]
            for job in scrape.get("scrape_configs", [])}
    for name, (_, port) in METRICS_PORTS.items():
        if jobs.get(name) != [f"{name}:{port}"]:
            problem("deploy/prometheus/prometheus.yml", f"job {name} does not scrape {name}:{port} (it has {jobs.get(name)})")


# --- Kubernetes ---------------------------------------------------------------------------------
def load_documents(files):
    documents = []
    for path in files:
        with open(path) as f:
            for document in yaml.safe_load_all(f):
                if document:
                    documents.append((os.path.basename(path), document))
    return documents


def check_kubernetes(directory):
    manifests = sorted(glob.glob(os.path.join(directory, "[0-9]*.yaml")))
    templates = sorted(glob.glob(os.path.join(directory, "templates", "*.yaml")))

    kustomization_path = os.path.join(directory, "kustomization.yaml")
    with open(kustomization_path) as f:
        kustomization = yaml.safe_load(f)
    listed = kustomization.get("resources", [])
    if sorted(listed) != [os.path.basename(p) for p in manifests]:
        problem("kustomization.yaml", f"resources {listed} are not exactly the numbered manifests")
    if any("secret" in r.lower() or r.startswith("templates") for r in listed):
        problem("kustomization.yaml", "lists the Secret template")

    documents = load_documents(manifests)
    template_documents = load_documents(templates)
    by_kind = {}
    for file, document in documents + template_documents:
        by_kind.setdefault(document.get("kind"), []).append((file, document))
        namespace = document.get("metadata", {}).get("namespace")
        if document.get("kind") != "Namespace" and namespace != "auth-backend":
            problem(file, f"{document.get('kind')}/{document['metadata'].get('name')} is not in namespace auth-backend")

    # The Secret template: placeholders only, and every key the Deployments read.
    secret_keys = set()
    for file, secret in by_kind.get("Secret", []):
        for key, value in (secret.get("stringData") or {}).items():
            secret_keys.add(key)
            if "REPLACE" not in str(value):
                problem(f"templates/{file}", f"{key} holds a value that is not a REPLACE placeholder")
        if secret.get("data"):
            problem(f"templates/{file}", "uses data: (base64 values); use stringData placeholders")
    for file, document in documents:
        if document.get("kind") == "Secret":
            problem(file, "a Secret among the applied manifests (keep it in templates/)")

    config_maps = {d["metadata"]["name"]: d.get("data", {}) for _, d in by_kind.get("ConfigMap", [])}
    config = config_maps.get("auth-config", {})
    if not config:
        problem("configmap", "no ConfigMap auth-config")
    if config.get("AUTH_ENVIRONMENT") != "production":
        problem("configmap", "AUTH_ENVIRONMENT is not production")
    if config.get("AUTH_BIND_HOST") != "0.0.0.0":
        problem("configmap", "AUTH_BIND_HOST is not 0.0.0.0")
    for variable in ("AUTH_RPC_SECRET", "AUTH_DATABASE_URL", "AUTH_MASTER_KEY", "AUTH_OTP_SECRET", "AUTH_OTP_WEBHOOK_SECRET"):
        if variable in config:
            problem("configmap", f"{variable} is a secret and belongs in the Secret")
    if "AUTH_RPC_MESH_MTLS" in config:
        problem("configmap", "AUTH_RPC_MESH_MTLS is set; the manifests use mutual TLS")
    for variable in ("AUTH_OTP_SMS_PROVIDER", "AUTH_OTP_EMAIL_PROVIDER"):
        if config.get(variable, "log") == "log":
            problem("configmap", f"{variable} is log (or unset); production refuses it")
    tls_paths = {variable: config.get(variable, "") for variable in TLS_VARIABLES}
    if not all(str(path).startswith("/") for path in tls_paths.values()):
        problem("configmap", f"{', '.join(TLS_VARIABLES)} are not all file paths")
    tls_directories = {os.path.dirname(str(path)) for path in tls_paths.values()}

    # cert-manager: a CA Issuer, and one Certificate per caller naming it (subjectAltName DNS).
    issuers = {d["metadata"]["name"]: d for _, d in by_kind.get("Issuer", [])}
    certificates = {d["spec"].get("secretName"): (f, d) for f, d in by_kind.get("Certificate", [])}
    for caller in sorted(CERTIFICATE_NAMES):
        entry = certificates.get(f"{caller}-rpc-tls")
        if not entry:
            problem("certificates", f"no cert-manager Certificate with secretName {caller}-rpc-tls")
            continue
        file, certificate = entry
        spec = certificate["spec"]
        if spec.get("dnsNames") != [caller]:
            problem(file, f"Certificate {caller}-rpc-tls: dnsNames is {spec.get('dnsNames')}, expected [{caller}]")
        if not {"server auth", "client auth"} <= set(spec.get("usages", [])):
            problem(file, f"Certificate {caller}-rpc-tls: usages lack server auth and client auth")
        issuer = issuers.get(spec.get("issuerRef", {}).get("name"))
        if not issuer or "ca" not in issuer.get("spec", {}):
            problem(file, f"Certificate {caller}-rpc-tls: not issued by a CA Issuer of the namespace")

    services = {d["metadata"]["name"]: (f, d) for f, d in by_kind.get("Service", [])}
    deployments = {d["metadata"]["name"]: (f, d) for f, d in by_kind.get("Deployment", [])}
    budgets = [d for _, d in by_kind.get("PodDisruptionBudget", [])]

    if set(deployments) != OUR_SERVICES:
        problem("kubernetes", f"Deployments are {sorted(deployments)}, expected {sorted(OUR_SERVICES)}")

    for name, (file, deployment) in deployments.items():
        spec = deployment["spec"]
        pod = spec["template"]["spec"]
        labels = spec["template"]["metadata"].get("labels", {})
        selector = spec["selector"].get("matchLabels", {})
        if not subset(selector, labels):
            problem(file, f"Deployment {name}: selector does not match the pod labels")
        if labels.get("app.kubernetes.io/part-of") != "auth-backend":
            problem(file, f"Deployment {name}: pods lack app.kubernetes.io/part-of=auth-backend (NetworkPolicies)")
        if spec.get("replicas", 1) < 2:
            problem(file, f"Deployment {name}: fewer than 2 replicas")
        if pod.get("terminationGracePeriodSeconds", 30) < 15:
            problem(file, f"Deployment {name}: terminationGracePeriodSeconds < 15")
        pod_security = pod.get("securityContext", {})
        if pod_security.get("runAsNonRoot") is not True:
            problem(file, f"Deployment {name}: pod securityContext.runAsNonRoot is not true")
        if pod_security.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            problem(file, f"Deployment {name}: no RuntimeDefault seccomp profile")
        if pod.get("automountServiceAccountToken") is not False:
            problem(file, f"Deployment {name}: mounts a service account token")
        if not any(subset(b["spec"]["selector"].get("matchLabels", {}), labels) for b in budgets):
            problem(file, f"Deployment {name}: no PodDisruptionBudget selects its pods")
        service = services.get(name)
        if not service or not subset(service[1]["spec"].get("selector", {}), labels):
            problem(file, f"Deployment {name}: no Service of the same name selects its pods")

        for container in pod["containers"]:
            where = f"{file}: {name}/{container['name']}"
            security = container.get("securityContext", {})
            if security.get("readOnlyRootFilesystem") is not True:
                problem(where, "readOnlyRootFilesystem is not true")
            if security.get("allowPrivilegeEscalation") is not False:
                problem(where, "allowPrivilegeEscalation is not false")
            if "ALL" not in security.get("capabilities", {}).get("drop", []):
                problem(where, "capabilities do not drop ALL")
            resources = container.get("resources", {})
            for part in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    if resource not in resources.get(part, {}):
                        problem(where, f"no {part}.{resource}")
            for probe in ("readinessProbe", "livenessProbe"):
                if probe not in container:
                    problem(where, f"no {probe}")
            command = container.get("command", [])
            if not command or os.path.basename(command[0]) != name:
                problem(where, f"command {command} does not run {name}")
            for ref in container.get("envFrom", []):
                if "configMapRef" in ref and ref["configMapRef"]["name"] not in config_maps:
                    problem(where, f"envFrom names a missing ConfigMap {ref['configMapRef']['name']}")
            mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
            volumes = {v["name"]: v for v in pod.get("volumes", [])}
            tls_volume = next((volume for volume_name, volume in volumes.items()
                               if volume.get("secret", {}).get("secretName") == f"{name}-rpc-tls"), None)
            if not tls_volume or {mounts.get(tls_volume["name"])} != tls_directories:
                problem(where, f"does not mount Secret {name}-rpc-tls at {sorted(tls_directories)}")
            read_secrets = set()
            for variable in container.get("env", []):
                ref = variable.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    read_secrets.add(variable["name"])
                    if ref["name"] != "auth-secrets" or ref["key"] not in secret_keys:
                        problem(where, f"{variable['name']} reads {ref['name']}/{ref['key']}, not in templates/secret.yaml")
            if read_secrets != SECRETS.get(name, set()):
                problem(where, f"reads secrets {sorted(read_secrets)}, expected {sorted(SECRETS.get(name, set()))}")
            ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
            metrics_variable, metrics_port = METRICS_PORTS.get(name, ("?", None))
            if ports.get("metrics") != metrics_port or str(config.get(metrics_variable)) != str(metrics_port):
                problem(where, f"metrics port is not {metrics_port} in both the container (port named metrics) and {metrics_variable}")
            scrape = {"prometheus.io/scrape": "true", "prometheus.io/port": str(metrics_port), "prometheus.io/path": "/metrics"}
            annotations = spec["template"]["metadata"].get("annotations") or {}
            for key, value in scrape.items():
                if annotations.get(key) != value:
                    problem(file, f"Deployment {name}: pod annotation {key} is {annotations.get(key)!r}, expected {value!r}")
            if name in RPC_SERVICES:
                port_variable, addresses_variable, port = RPC_SERVICES[name]
                if ports.get("rpc") != port or str(config.get(port_variable)) != str(port):
                    problem(where, f"RPC port is not {port} in both the container and {port_variable}")
                for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                    if probe in container and target_port(container[probe].get("exec", {}).get("command", [])) != port:
                        problem(where, f"{probe} does not run authctl health against port {port}")
                if service:
                    service_spec = service[1]["spec"]
                    if service_spec.get("clusterIP") != "None":
                        problem(service[0], f"Service {name} is not headless (clusterIP: None)")
                    if [p["port"] for p in service_spec.get("ports", [])] != [port]:
                        problem(service[0], f"Service {name} does not expose port {port}")
                address = config.get(addresses_variable, "")
                for item in filter(None, address.split(",")):
                    host, _, item_port = item.strip().rpartition(":")
                    if host.split(".")[0] != name or item_port != str(port):
                        problem("configmap", f"{addresses_variable}={address} does not name Service {name} port {port}")
            else:
                if ports.get("http") != GATEWAY_PORT or str(config.get("AUTH_GATEWAY_PORT")) != str(GATEWAY_PORT):
                    problem(where, f"HTTP port is not {GATEWAY_PORT} in both the container and AUTH_GATEWAY_PORT")
                if container.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/health/ready":
                    problem(where, "readinessProbe is not GET /health/ready")
                if container.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/health/live":
                    problem(where, "livenessProbe is not GET /health/live")

    policies = [d for _, d in by_kind.get("NetworkPolicy", [])]
    if not any(p["spec"].get("podSelector") == {} and not p["spec"].get("ingress")
               and "Ingress" in p["spec"].get("policyTypes", []) for p in policies):
        problem("network policies", "no default-deny ingress policy")
    for name in RPC_SERVICES:
        port = RPC_SERVICES[name][2]
        rules = [p for p in policies if p["spec"]["podSelector"].get("matchLabels", {}).get("app.kubernetes.io/name") == name
                 and p["spec"].get("ingress")]
        if not rules:
            problem("network policies", f"no ingress policy admits RPC to {name}")
        for rule in (r for p in rules for r in p["spec"]["ingress"]):
            if not rule.get("from"):
                problem("network policies", f"{name} accepts connections from anywhere")
            if [p.get("port") for p in rule.get("ports", [])] != [port]:
                problem("network policies", f"{name}'s ingress is not exactly port {port}")
    # Prometheus reaches every pod's metrics port, and only from a namespace or pods it names.
    for name, (file, deployment) in deployments.items():
        labels = deployment["spec"]["template"]["metadata"].get("labels", {})
        metrics_port = METRICS_PORTS.get(name, ("?", None))[1]
        admitting = [rule for p in policies if subset(p["spec"]["podSelector"].get("matchLabels", {}), labels)
                     for rule in p["spec"].get("ingress") or []
                     if any(port.get("port") in ("metrics", metrics_port) for port in rule.get("ports", []))]
        if not admitting:
            problem("network policies", f"no ingress policy admits scraping {name}'s metrics port ({metrics_port})")
        if any(not rule.get("from") for rule in admitting):
            problem("network policies", f"{name}'s metrics port accepts connections from anywhere")
    ingress_kinds = by_kind.get("Ingress", [])
    for file, ingress in ingress_kinds:
        for rule in ingress["spec"].get("rules", []):
            for path in rule.get("http", {}).get("paths", []):
                if path["backend"].get("service", {}).get("name") != "gateway":
                    problem(file, "an Ingress routes to something other than the gateway")
    return len(documents) + len(template_documents), len(manifests) + len(templates)


# --- Dockerfile ---------------------------------------------------------------------------------
def check_cloudnative_pg(directory):
    """The optional CloudNativePG overlay: a Cluster with a synchronous standby and a PgBouncer
    Pooler in transaction mode in front of its primary (docs/deployment.md, PostgreSQL failover)."""
    path = os.path.join(directory, "cloudnative-pg", "cluster.yaml")
    if not os.path.exists(path):
        problem("cloudnative-pg", "deploy/kubernetes/cloudnative-pg/cluster.yaml is missing")
        return
    documents = load_documents([path])
    clusters = [d for _, d in documents if d.get("kind") == "Cluster"]
    poolers = [d for _, d in documents if d.get("kind") == "Pooler"]
    for _, document in documents:
        if document.get("metadata", {}).get("namespace") != "auth-backend":
            problem(path, f"{document.get('kind')} is not in namespace auth-backend")
        if document.get("apiVersion") != "postgresql.cnpg.io/v1":
            problem(path, f"{document.get('kind')}: apiVersion {document.get('apiVersion')}")
    if len(clusters) != 1:
        problem(path, f"{len(clusters)} Cluster documents, expected 1")
        return
    cluster = clusters[0]
    spec = cluster.get("spec", {})
    if spec.get("instances", 0) < 2:
        problem(path, "Cluster: fewer than 2 instances (nothing to fail over to)")
    synchronous = spec.get("postgresql", {}).get("synchronous", {})
    if synchronous.get("number", 0) < 1 and spec.get("minSyncReplicas", 0) < 1:
        problem(path, "Cluster: no synchronous standby (an acknowledged commit could be lost at failover)")
    if spec.get("bootstrap", {}).get("initdb", {}).get("database") != "auth":
        problem(path, "Cluster: the database is not auth")
    if not any(
        p.get("spec", {}).get("cluster", {}).get("name") == cluster["metadata"]["name"]
        and p.get("spec", {}).get("type") == "rw"
        and p.get("spec", {}).get("pgbouncer", {}).get("poolMode") == "transaction"
        for p in poolers
    ):
        problem(path, "no Pooler of type rw in transaction mode for the Cluster")
    with open(os.path.join(directory, "cloudnative-pg", "kustomization.yaml")) as f:
        if yaml.safe_load(f).get("resources") != ["cluster.yaml"]:
            problem("cloudnative-pg/kustomization.yaml", "resources is not [cluster.yaml]")


def check_pod_monitor(directory):
    """The optional Prometheus Operator overlay: a PodMonitor scraping every Deployment's pods on
    their `metrics` port, with the service's name as the job."""
    path = os.path.join(directory, "monitoring", "pod-monitor.yaml")
    if not os.path.exists(path):
        problem("monitoring", "deploy/kubernetes/monitoring/pod-monitor.yaml is missing")
        return
    monitors = [d for _, d in load_documents([path]) if d.get("kind") == "PodMonitor"]
    path = "monitoring/pod-monitor.yaml"
    if len(monitors) != 1:
        problem(path, f"{len(monitors)} PodMonitor documents, expected 1")
        return
    monitor = monitors[0]
    spec = monitor.get("spec", {})
    if monitor.get("apiVersion") != "monitoring.coreos.com/v1":
        problem(path, f"PodMonitor: apiVersion {monitor.get('apiVersion')}")
    if monitor.get("metadata", {}).get("namespace") != "auth-backend":
        problem(path, "PodMonitor is not in namespace auth-backend")
    if spec.get("jobLabel") != "app.kubernetes.io/name":
        problem(path, "PodMonitor: jobLabel is not app.kubernetes.io/name (the alerts' job names)")
    if not any(e.get("port") == "metrics" and e.get("path", "/metrics") == "/metrics"
               for e in spec.get("podMetricsEndpoints", [])):
        problem(path, "PodMonitor: no podMetricsEndpoint on port metrics, path /metrics")
    selector = spec.get("selector", {}).get("matchLabels", {})
    deployments = [d for _, d in load_documents(sorted(glob.glob(os.path.join(directory, "[0-9]*.yaml"))))
                   if d.get("kind") == "Deployment"]
    for deployment in deployments:
        if not subset(selector, deployment["spec"]["template"]["metadata"].get("labels", {})):
            problem(path, f"PodMonitor: its selector does not select {deployment['metadata']['name']}'s pods")
    with open(os.path.join(directory, "monitoring", "kustomization.yaml")) as f:
        if yaml.safe_load(f).get("resources") != ["pod-monitor.yaml"]:
            problem("monitoring/kustomization.yaml", "resources is not [pod-monitor.yaml]")


# --- Prometheus alerts and the Grafana dashboard --------------------------------------------------
PROMQL_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
                   "offset", "bool", "inf", "nan", "atan2"}
GRAFANA_INTERVAL = re.compile(r"\$\{?__(rate_interval|interval|range)(_ms|_s)?\}?")


def promql_metric_names(expr):
    """The metric names a PromQL expression reads: the identifiers left once strings, label
    matchers, ranges and grouping label lists are removed, less functions (a name before `(`)
    and keywords. `up` is Prometheus's own."""
    text = re.sub(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|`[^`]*`", '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w.$:])[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        name = match.group(0)
        if text[match.end():].lstrip().startswith("(") or name.lower() in PROMQL_KEYWORDS or name == "up":
            continue
        names.add(name)
    return names


def markdown_anchors(path):
    """GitHub's anchors of a Markdown file's headings."""
    anchors = set()
    with open(path) as f:
        for line in f:
            match = re.match(r"#{1,6}\s+(.*?)\s*$", line)
            if match:
                text = re.sub(r"[^\w\- ]", "", match.group(1).lower().replace("`", ""))
                anchors.add(text.replace(" ", "-"))
    return anchors


def check_monitoring(prometheus_directory, dashboard_path, sources, docs, dashboard_rules):
    """alerts.yaml, its tests and the dashboard: complete, and reading only metrics the services
    export (each name a string literal in Sources/**/*.swift, generated code left out)."""
    alerts_path = os.path.join(prometheus_directory, "alerts.yaml")
    tests_path = os.path.join(prometheus_directory, "alerts.test.yaml")
    used = {}  # metric name -> where it is used

    with open(alerts_path) as f:
        groups = (yaml.safe_load(f) or {}).get("groups") or []
    anchors = markdown_anchors(docs)
    alerts = []
    for group in groups:
        for rule in group.get("rules") or []:
            name = rule.get("alert") or rule.get("record")
            where = f"deploy/prometheus/alerts.yaml: {name}"
            if "alert" not in rule:
                continue
            alerts.append(name)
            for field in ("expr", "for"):
                if field not in rule:
                    problem(where, f"no {field}")
            if (rule.get("labels") or {}).get("severity") not in ("critical", "warning"):
                problem(where, "labels.severity is not critical or warning")
            annotations = rule.get("annotations") or {}
            for field in ("summary", "description", "runbook"):
                if not annotations.get(field):
                    problem(where, f"no annotations.{field}")
            runbook = str(annotations.get("runbook", ""))
            if not runbook.startswith("docs/deployment.md#") or runbook.split("#", 1)[1] not in anchors:
                problem(where, f"runbook {runbook!r} is not a heading of docs/deployment.md")
            for metric in promql_metric_names(str(rule.get("expr", ""))):
                used.setdefault(metric, set()).add(f"alerts.yaml ({name})")
    if len(set(alerts)) != len(alerts):
        problem("deploy/prometheus/alerts.yaml", "two alerts have the same name")

    # Every alert has a case that fires it and one that must not (promtool runs them).
    with open(tests_path) as f:
        tests = (yaml.safe_load(f) or {}).get("tests") or []
    cases = [case for test in tests for case in test.get("alert_rule_test") or []]
    for name in alerts:
        if not any(c.get("alertname") == name and c.get("exp_alerts") for c in cases):
            problem("deploy/prometheus/alerts.test.yaml", f"no case where {name} fires")
        if not any(c.get("alertname") == name and not c.get("exp_alerts") for c in cases):
            problem("deploy/prometheus/alerts.test.yaml", f"no case where {name} stays quiet")

    # The dashboard: a Grafana export whose data source is an input, every panel with a query.
    where = os.path.relpath(dashboard_path)
    try:
        with open(dashboard_path) as f:
            dashboard = json.load(f)
    except ValueError as error:
        problem(where, f"is not JSON: {error}")
        return f"{len(alerts)} alerts"
    if not any(i.get("name") == "DS_PROMETHEUS" and i.get("pluginId") == "prometheus" for i in dashboard.get("__inputs", [])):
        problem(where, "no __inputs entry DS_PROMETHEUS (a prometheus data source)")
    if not isinstance(dashboard.get("schemaVersion"), int) or dashboard["schemaVersion"] < 36:
        problem(where, f"schemaVersion {dashboard.get('schemaVersion')!r}, expected 36 or later")
    panels = [p for p in dashboard.get("panels", []) for p in [p] + p.get("panels", [])]
    recording = []
    queried = 0
    for panel in panels:
        if panel.get("type") == "row":
            continue
        queried += 1
        title = panel.get("title") or f"panel {panel.get('id')}"
        targets = [t for t in panel.get("targets", []) if str(t.get("expr", "")).strip()]
        if not targets:
            problem(where, f"panel {title!r} has no query")
        for target in [panel] + targets:
            if (target.get("datasource") or {}).get("uid") != "${DS_PROMETHEUS}":
                problem(where, f"panel {title!r}: data source is not ${{DS_PROMETHEUS}}")
        for target in targets:
            expr = GRAFANA_INTERVAL.sub("5m", target["expr"])
            recording.append({"record": f"dashboard:panel_{panel.get('id')}_{target.get('refId', 'A')}", "expr": expr})
            for metric in promql_metric_names(expr):
                used.setdefault(metric, set()).add(f"{os.path.basename(dashboard_path)} ({title})")
    with open(dashboard_rules, "w") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recording}]}, f, sort_keys=False)

    # Each metric is exported by some service: its name (a histogram's, for _bucket, _count and
    # _sum) is a string literal in the Swift sources.
    literals = set()
    for path in glob.glob(os.path.join(sources, "**", "*.swift"), recursive=True):
        if "Generated" in os.path.relpath(path, sources).split(os.sep):
            continue
        with open(path, encoding="utf-8") as f:
            literals.update(re.findall(r'"([A-Za-z_:][A-Za-z0-9_:]*)"', f.read()))
    for metric in sorted(used):
        base = re.sub(r"_(bucket|count|sum)$", "", metric)
        if metric not in literals and base not in literals:
            problem("monitoring", f"metric {base} (used in {', '.join(sorted(used[metric]))}) is not exported by any "
                    f"service: no \"{base}\" in Sources/**/*.swift")
    return f"{len(alerts)} alerts, {queried} dashboard panels, {len(used)} metric names"


def check_dockerfile(path):
    where = os.path.relpath(path)
    with open(path) as f:
        text = f.read()
    instructions = [line.strip() for line in re.sub(r"\\\n", " ", text).splitlines()
                    if line.strip() and not line.strip().startswith("#")]
    froms = [line for line in instructions if line.upper().startswith("FROM ")]
    if not any("${SWIFT_IMAGE}" in line for line in froms) or not any("${RUNTIME_IMAGE}" in line for line in froms):
        problem(where, "builder and runtime base images are not build arguments")
    if "STOPSIGNAL SIGTERM" not in instructions:
        problem(where, "no STOPSIGNAL SIGTERM")
    users = [line.split()[1] for line in instructions if line.upper().startswith("USER ")]
    if not users or users[-1].split(":")[0] in ("0", "root"):
        problem(where, "the image does not end as a non-root user")
    for line in instructions:
        if line.upper().startswith(("ENV ", "ARG ")) and re.search(r"SECRET|PASSWORD|MASTER_KEY|DATABASE_URL", line):
            problem(where, f"sets a secret: {line}")
    # The executables link the Swift runtime dynamically: deploy/stage-binaries.sh stages them
    # and the runtime libraries (their resources are embedded in them); deploy/runtime-rootfs.sh
    # makes the runtime image's filesystem of them and of what they load.
    if "deploy/stage-binaries.sh" not in text:
        problem(where, "does not stage the executables with deploy/stage-binaries.sh")
    if any("--static-swift-stdlib" in line for line in instructions):
        problem(where, "builds with --static-swift-stdlib (a copy of the Swift runtime in every executable)")
    if "deploy/runtime-rootfs.sh" not in text or "/usr/lib/swift/linux" not in text:
        problem(where, "does not assemble the runtime filesystem (with the Swift runtime in /usr/lib/swift/linux) with deploy/runtime-rootfs.sh")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--compose-config", required=True)
    parser.add_argument("--compose-monitoring-config", required=True)
    parser.add_argument("--compose-tracing-config", required=True)
    parser.add_argument("--kubernetes", required=True)
    parser.add_argument("--dockerfile", required=True)
    parser.add_argument("--prometheus", required=True)
    parser.add_argument("--grafana", required=True)
    parser.add_argument("--sources", required=True)
    parser.add_argument("--docs", required=True)
    parser.add_argument("--dashboard-rules", required=True)
    args = parser.parse_args()
    compose_services, resources, files, monitoring = "?", "?", "?", "?"
    # A malformed file (already reported by the schema checks) must not hide the other checks.
    try:
        compose_services = check_compose(args.compose_config)
    except Exception as error:  # noqa: BLE001
        problem("docker-compose.yml", f"could not be checked ({type(error).__name__}: {error})")
    try:
        resources, files = check_kubernetes(args.kubernetes)
    except Exception as error:  # noqa: BLE001
        problem("deploy/kubernetes", f"could not be checked ({type(error).__name__}: {error})")
    try:
        check_cloudnative_pg(args.kubernetes)
    except Exception as error:  # noqa: BLE001
        problem("deploy/kubernetes/cloudnative-pg", f"could not be checked ({type(error).__name__}: {error})")
    try:
        check_pod_monitor(args.kubernetes)
    except Exception as error:  # noqa: BLE001
        problem("deploy/kubernetes/monitoring", f"could not be checked ({type(error).__name__}: {error})")
    try:
        check_compose_monitoring(args.compose_monitoring_config, args.prometheus)
    except Exception as error:  # noqa: BLE001
        problem("docker-compose.yml (--profile monitoring)", f"could not be checked ({type(error).__name__}: {error})")
    try:
        check_compose_tracing(args.compose_tracing_config)
    except Exception as error:  # noqa: BLE001
        problem("docker-compose.yml (--profile tracing)", f"could not be checked ({type(error).__name__}: {error})")
    try:
        monitoring = check_monitoring(args.prometheus, args.grafana, args.sources, args.docs, args.dashboard_rules)
    except Exception as error:  # noqa: BLE001
        problem("deploy/prometheus, deploy/grafana", f"could not be checked ({type(error).__name__}: {error})")
    try:
        check_dockerfile(args.dockerfile)
    except Exception as error:  # noqa: BLE001
        problem("deploy/Dockerfile", f"could not be checked ({type(error).__name__}: {error})")
    for line in problems:
        print(f"check-deploy: {line}", file=sys.stderr)
    print(f"{compose_services} compose services, {resources} Kubernetes resources in {files} files, {monitoring}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
