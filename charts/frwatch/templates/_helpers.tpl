{{/* Names ------------------------------------------------------------------------------------------ */}}
{{- define "frwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "frwatch.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "frwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "frwatch.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "frwatch.webhookServiceName" -}}
{{- printf "%s-webhook" (include "frwatch.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- /* The leader election's Lease (operator.leaderElection), in the release namespace. */ -}}
{{- define "frwatch.liveLeasePrefix" -}}
{{- printf "%s-live" (include "frwatch.fullname" .) | trunc 55 | trimSuffix "-" -}}
{{- end -}}

{{- define "frwatch.leaseName" -}}
{{- printf "%s-leader" (include "frwatch.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "frwatch.webhookTLSSecretName" -}}
{{- printf "%s-webhook-tls" (include "frwatch.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* tls.mode=operator: the Secret the operator creates and keeps its CA and certificate in (not rendered). */}}
{{- define "frwatch.webhookCertsSecretName" -}}
{{- printf "%s-webhook-certs" (include "frwatch.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Secret where the operator keeps the keys the agents' control tokens derive from. */}}
{{- define "frwatch.agentKeySecretName" -}}
{{- printf "%s-agent-key" (include "frwatch.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "frwatch.webhookConfigName" -}}
{{- include "frwatch.fullname" . -}}
{{- end -}}

{{/* Labels ----------------------------------------------------------------------------------------- */}}
{{- define "frwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "frwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "frwatch.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "frwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: frwatch
{{- end -}}

{{/* The one image (operator, agent and analyzer run the same `frwatch` entrypoint) ------------------- */}}
{{- define "frwatch.image" -}}
{{- $repo := .Values.image.repository -}}
{{- $ref := "" -}}
{{- if .Values.image.digest -}}
{{- $ref = printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- $ref = printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- include "frwatch.fromRegistry" (dict "ref" $ref "registry" .Values.image.registry) -}}
{{- end -}}

{{/* An image reference pulled from image.registry (a mirror or private registry) when set: its registry
     host (a first path part with a dot or a colon, or localhost) is replaced; without one it is prefixed. */}}
{{- define "frwatch.fromRegistry" -}}
{{- $ref := .ref -}}
{{- if .registry -}}
{{- $parts := splitList "/" $ref -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $ref = join "/" (rest $parts) -}}
{{- end -}}
{{- printf "%s/%s" (trimSuffix "/" .registry) $ref -}}
{{- else -}}
{{- $ref -}}
{{- end -}}
{{- end -}}

{{/* Names of the pull Secrets of a pod the operator makes or changes (the agent's, the analyzer Job's):
     its own list, else the chart's imagePullSecrets; comma-separated, as config.py reads them. */}}
{{- define "frwatch.pullSecretNames" -}}
{{- $names := list -}}
{{- range (default .top.Values.imagePullSecrets .own) -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- join "," $names -}}
{{- end -}}

{{/* JSON of a resources map as config.ComputeResources reads it: {"requests": {...}, "limits": {...}} */}}
{{- define "frwatch.resourcesJSON" -}}
{{- dict "requests" (default (dict) .requests) "limits" (default (dict) .limits) | toJson -}}
{{- end -}}

{{/* The webhook's CA and serving certificate in tls.mode=helm, as JSON {ca, crt, key} (base64 PEM).
     Generated once per render and memoized in .Values, so the Secret, the caBundle and the Deployment's
     checksum agree; on upgrade the certificate in the cluster's Secret is kept (lookup). */}}
{{- define "frwatch.webhookCerts" -}}
{{- if not (hasKey .Values "_frwatchWebhookCerts") -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (include "frwatch.webhookTLSSecretName" .) -}}
{{- $certs := dict -}}
{{- if and $secret (index ($secret.data | default dict) "ca.crt") -}}
{{- $certs = dict "ca" (index $secret.data "ca.crt") "crt" (index $secret.data "tls.crt") "key" (index $secret.data "tls.key") -}}
{{- else -}}
{{- $svc := include "frwatch.webhookServiceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- $dns := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) -}}
{{- $ca := genCA (printf "%s-webhook-ca" (include "frwatch.fullname" .)) (int .Values.webhook.tls.validityDays) -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc $ns) nil $dns (int .Values.webhook.tls.validityDays) $ca -}}
{{- $certs = dict "ca" ($ca.Cert | b64enc) "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) -}}
{{- end -}}
{{- $_ := set .Values "_frwatchWebhookCerts" $certs -}}
{{- end -}}
{{- index .Values "_frwatchWebhookCerts" | toJson -}}
{{- end -}}

{{/* Where the analyzer Jobs run: analyzer.namespace, else the release namespace. */}}
{{/* storeAccess.mode=identity: the analyzer Jobs' own ServiceAccount (in analyzer.namespace). */}}
{{- define "frwatch.analyzerServiceAccountName" -}}
{{- printf "%s-analyzer" (include "frwatch.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "frwatch.analyzerNamespace" -}}
{{- default .Release.Namespace .Values.analyzer.namespace -}}
{{- end -}}

{{/* The pod labels that mark the pods of the enabled job kinds (operator.jobKinds), as a JSON list: one
webhook entry each (frwatch_operator.kinds.job_kind.pod_labels). */}}
{{- define "frwatch.podJobLabels" -}}
{{- $labels := list -}}
{{- if has "PyTorchJob" .Values.operator.jobKinds -}}
{{- $labels = append $labels "training.kubeflow.org/job-name" -}}
{{- end -}}
{{- if or (has "TrainJob" .Values.operator.jobKinds) (has "JobSet" .Values.operator.jobKinds) -}}
{{- $labels = append $labels "jobset.sigs.k8s.io/jobset-name" -}}
{{- end -}}
{{- toJson $labels -}}
{{- end -}}
