{{/*
The release name is the base name of every object (<release>, <release>-worker, -config,
-token, -proxy): the names the Ansible role agent_k8s has always used, so that one release per
namespace holds what the role made. values.schema.json has checked the values before this runs.
*/}}
{{- define "wfa.name" -}}
{{- $name := .Release.Name -}}
{{- /* Room for the suffixes and for the pod names the Deployment derives (63 at most). */ -}}
{{- if or (gt (len $name) 40) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name)) -}}
{{- fail (printf "release name %q: the chart names its objects after it, so it must be a lowercase RFC 1123 label of at most 40 characters (letters, digits and -)" $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{- define "wfa.selector" -}}
app.kubernetes.io/name: workflow-agent
app.kubernetes.io/instance: {{ include "wfa.name" . | quote }}
{{- end -}}

{{/* Labels of the pods: the selector, the component, and the user's labels. */}}
{{- define "wfa.podLabels" -}}
{{- $labels := deepCopy (.Values.labels | default dict) -}}
{{- $_ := set $labels "app.kubernetes.io/part-of" "workflow-agent" -}}
{{- $_ := set $labels "app.kubernetes.io/component" "agent" -}}
{{- $_ := mergeOverwrite $labels (include "wfa.selector" . | fromYaml) -}}
{{- toYaml $labels -}}
{{- end -}}

{{/* Labels of every object; call with (dict "ctx" $ "component" "agent"|"worker"|"test"). */}}
{{- define "wfa.labels" -}}
{{- $ := .ctx -}}
{{- $labels := deepCopy ($.Values.labels | default dict) -}}
{{- $_ := set $labels "app.kubernetes.io/part-of" "workflow-agent" -}}
{{- $_ := set $labels "app.kubernetes.io/component" .component -}}
{{- $_ := set $labels "app.kubernetes.io/managed-by" $.Release.Service -}}
{{- $_ := set $labels "app.kubernetes.io/version" $.Chart.AppVersion -}}
{{- $_ := set $labels "helm.sh/chart" (printf "%s-%s" $.Chart.Name $.Chart.Version) -}}
{{- $_ := mergeOverwrite $labels (include "wfa.selector" $ | fromYaml) -}}
{{- toYaml $labels -}}
{{- end -}}

{{- define "wfa.tokenSecret" -}}
{{- .Values.existingSecret | default (printf "%s-token" (include "wfa.name" .)) -}}
{{- end -}}

{{- define "wfa.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* Inside the agent container: the ConfigMap is mounted here. */}}
{{- define "wfa.configDir" -}}/etc/workflow-agent{{- end -}}

{{/*
A Go duration (already checked by the schema) in whole seconds, rounded up: what the agent's
own parser gives for drainTimeout (terminationGracePeriodSeconds needs a number).
*/}}
{{- define "wfa.durationSeconds" -}}
{{- $units := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "μs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "([0-9]+\\.?[0-9]*|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)" (toString .) -1 -}}
{{- $number := regexFind "^[0-9.]+" . -}}
{{- $total = addf $total (mulf (float64 $number) (get $units (trimPrefix $number .))) -}}
{{- end -}}
{{- /* round first: float noise such as 71.99999999999999 must not lose a second */ -}}
{{- ceil (round $total 6) | int -}}
{{- end -}}

{{/* The agent config (no secrets: the token comes from the Secret as PULUMI_AGENT_TOKEN). */}}
{{- define "wfa.agentConfig" -}}
{{- $config := deepCopy (.Values.config | default dict) -}}
{{- if .Values.serviceUrl -}}
{{- $_ := set $config "service_url" .Values.serviceUrl -}}
{{- end -}}
{{- $_ := set $config "deploy_target" "kubernetes" -}}
{{- $_ := set $config "slots" (int .Values.slots) -}}
{{- $_ := set $config "drain_timeout" (toString .Values.drainTimeout) -}}
{{- $_ := set $config "http_server_port" (int .Values.port) -}}
{{- if .Values.caBundle -}}
{{- $_ := set $config "ca_bundle" (printf "%s/ca-bundle.pem" (include "wfa.configDir" .)) -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/*
The strategic merge patch of every worker pod: the user's, the pool's instance label (so that
leftovers are found by it), and without podIds the ids the target would set, removed.
*/}}
{{- define "wfa.workerPatch" -}}
{{- $patch := deepCopy (.Values.worker.pod | default dict) -}}
{{- $meta := get $patch "metadata" | default dict -}}
{{- $labels := get $meta "labels" | default dict -}}
{{- $_ := set $labels "app.kubernetes.io/instance" (include "wfa.name" .) -}}
{{- $_ := set $meta "labels" $labels -}}
{{- $_ := set $patch "metadata" $meta -}}
{{- if not .Values.podIds -}}
{{- $spec := get $patch "spec" | default dict -}}
{{- $context := get $spec "securityContext" | default dict -}}
{{- range list "runAsUser" "runAsGroup" "fsGroup" -}}
{{- $_ := set $context . nil -}}
{{- end -}}
{{- $_ := set $spec "securityContext" $context -}}
{{- $_ := set $patch "spec" $spec -}}
{{- end -}}
{{- toPrettyJson $patch -}}
{{- end -}}

{{/* The ConfigMap's data, as YAML (also hashed into the pods' config-hash annotation). */}}
{{- define "wfa.configData" -}}
{{- $data := dict -}}
{{- $header := "# Workflow agent configuration, written by Helm (chart workflow-agent).\n# The pool token comes from the environment (PULUMI_AGENT_TOKEN, from a Secret).\n" -}}
{{- $_ := set $data "pulumi-workflow-agent.yaml" (printf "%s%s\n" $header (include "wfa.agentConfig" .)) -}}
{{- $_ := set $data "worker-pod.json" (include "wfa.workerPatch" .) -}}
{{- if .Values.caBundle -}}
{{- $_ := set $data "ca-bundle.pem" .Values.caBundle -}}
{{- end -}}
{{- toYaml $data -}}
{{- end -}}

{{/*
The proxy variables (as the agent role's hosts get them): both spellings of each URL, and
NO_PROXY only when there is a proxy to bypass, with the API server and in-cluster names added
($(KUBERNETES_SERVICE_HOST) must expand, so it is a value, not in the Secret).
*/}}
{{- define "wfa.proxySecretData" -}}
{{- $data := dict -}}
{{- if .Values.proxy.http -}}
{{- $_ := set $data "HTTP_PROXY" .Values.proxy.http -}}
{{- $_ := set $data "http_proxy" .Values.proxy.http -}}
{{- end -}}
{{- if .Values.proxy.https -}}
{{- $_ := set $data "HTTPS_PROXY" .Values.proxy.https -}}
{{- $_ := set $data "https_proxy" .Values.proxy.https -}}
{{- end -}}
{{- if $data -}}{{- toYaml $data -}}{{- end -}}
{{- end -}}

{{- define "wfa.proxyEnv" -}}
{{- $secretData := include "wfa.proxySecretData" . | fromYaml -}}
{{- $secret := printf "%s-proxy" (include "wfa.name" .) -}}
{{- $env := list -}}
{{- if .Values.proxy.existingSecret -}}
{{- /* The user's Secret holds HTTP_PROXY and/or HTTPS_PROXY; each spelling reads its key. */ -}}
{{- range list "HTTP_PROXY" "http_proxy" "HTTPS_PROXY" "https_proxy" -}}
{{- $ref := dict "name" $.Values.proxy.existingSecret "key" (upper .) "optional" true -}}
{{- $env = append $env (dict "name" . "valueFrom" (dict "secretKeyRef" $ref)) -}}
{{- end -}}
{{- else -}}
{{- range list "HTTP_PROXY" "http_proxy" "HTTPS_PROXY" "https_proxy" -}}
{{- if hasKey $secretData . -}}
{{- $env = append $env (dict "name" . "valueFrom" (dict "secretKeyRef" (dict "name" $secret "key" .))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $env -}}
{{- $noProxy := list -}}
{{- if .Values.proxy.noProxy -}}{{- $noProxy = append $noProxy .Values.proxy.noProxy -}}{{- end -}}
{{- $noProxy = concat $noProxy (list "$(KUBERNETES_SERVICE_HOST)" ".svc" ".cluster.local" "127.0.0.1" "localhost") -}}
{{- $env = append $env (dict "name" "NO_PROXY" "value" (join "," $noProxy)) -}}
{{- $env = append $env (dict "name" "no_proxy" "value" (join "," $noProxy)) -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/*
The agent container's env, in order: the chart's own variables, the proxy, then `env` by name
(the schema keeps the chart's names out of it).
*/}}
{{- define "wfa.env" -}}
{{- $dir := include "wfa.configDir" . -}}
{{- $env := list
  (dict "name" "PULUMI_AGENT_CONFIG" "value" (printf "%s/pulumi-workflow-agent.yaml" $dir))
  (dict "name" "PULUMI_AGENT_TOKEN" "valueFrom" (dict "secretKeyRef" (dict "name" (include "wfa.tokenSecret" .) "key" .Values.tokenSecretKey)))
  (dict "name" "WORKFLOW_AGENT_INSTANCE" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name")))
  (dict "name" "WORKFLOW_AGENT_WORKER_POD_PATCH" "value" (printf "%s/worker-pod.json" $dir))
  (dict "name" "PULUMI_AGENT_SERVICE_ACCOUNT_NAME" "value" (printf "%s-worker" (include "wfa.name" .)))
-}}
{{- range list (list "PULUMI_AGENT_NUM_CPUS" .Values.worker.cpu) (list "PULUMI_AGENT_MEM_QUANTITY" .Values.worker.memory) (list "WORKFLOW_AGENT_JOB_IMAGE_PULL_POLICY" .Values.worker.imagePullPolicy) -}}
{{- if ne (toString (index . 1)) "" -}}
{{- $env = append $env (dict "name" (index . 0) "value" (toString (index . 1))) -}}
{{- end -}}
{{- end -}}
{{- $env = concat $env (include "wfa.proxyEnv" . | fromYamlArray) -}}
{{- range $name, $value := .Values.env -}}
{{- $env = append $env (dict "name" $name "value" (toString $value)) -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/*
Env from a Secret is read at container start, so the pods carry a hash of what they read: a
new token, a rotated existing Secret (existingSecretChecksum, else its data looked up from the
cluster at install/upgrade) or new proxy settings roll them, draining. The token (or the
existing Secret's data) is always in the hashed text, so the 64-bit prefix cannot be
brute-forced back to a weak proxy password; without it (helm template of an existing Secret)
there is no annotation.
*/}}
{{- define "wfa.tokenHash" -}}
{{- $secretText := "" -}}
{{- if .Values.token -}}
{{- $secretText = .Values.token -}}
{{- else if .Values.existingSecretChecksum -}}
{{- $secretText = .Values.existingSecretChecksum -}}
{{- else -}}
{{- $found := lookup "v1" "Secret" .Release.Namespace .Values.existingSecret -}}
{{- if $found -}}{{- $secretText = toJson ($found.data | default dict) -}}{{- end -}}
{{- end -}}
{{- $proxyText := "" -}}
{{- $proxyData := include "wfa.proxySecretData" . | fromYaml -}}
{{- if $proxyData -}}
{{- $proxyText = toJson $proxyData -}}
{{- else if and .Values.proxy.existingSecret (not .Values.existingSecretChecksum) -}}
{{- $found := lookup "v1" "Secret" .Release.Namespace .Values.proxy.existingSecret -}}
{{- if $found -}}{{- $proxyText = toJson ($found.data | default dict) -}}{{- end -}}
{{- end -}}
{{- if $secretText -}}
{{- printf "%s%s" $secretText $proxyText | sha256sum | trunc 16 -}}
{{- end -}}
{{- end -}}

{{/* The pods' security context: the image's user, or none (podIds false: OpenShift). */}}
{{- define "wfa.podSecurityContext" -}}
runAsNonRoot: true
{{- if .Values.podIds }}
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "wfa.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end -}}

{{- define "wfa.minReplicas" -}}
{{- if kindIs "invalid" .Values.autoscaling.minReplicas -}}
{{- int .Values.replicas -}}
{{- else -}}
{{- int .Values.autoscaling.minReplicas -}}
{{- end -}}
{{- end -}}
