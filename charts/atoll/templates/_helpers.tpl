{{- define "atoll.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "atoll.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* One identity per component: the controller and the webhook never share credentials. */}}
{{- define "atoll.controllerServiceAccount" -}}
{{ default (printf "%s-controller" (include "atoll.fullname" .)) .Values.serviceAccount.controllerName }}
{{- end -}}
{{- define "atoll.webhookServiceAccount" -}}
{{ default (printf "%s-webhook" (include "atoll.fullname" .)) .Values.serviceAccount.webhookName }}
{{- end -}}

{{- define "atoll.image" -}}
{{- if .Values.image.digest -}}{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}{{- end -}}
{{- end -}}

{{- define "atoll.policyName" -}}
{{ default (printf "%s-policy" (include "atoll.fullname" .)) .Values.policyConfigMap.name }}
{{- end -}}

{{- define "atoll.policyNamespace" -}}
{{ default .Release.Namespace .Values.policyConfigMap.namespace }}
{{- end -}}

{{- define "atoll.webhookService" -}}
{{ include "atoll.fullname" . }}-webhook
{{- end -}}

{{- define "atoll.webhookSecret" -}}
{{ default (printf "%s-webhook-tls" (include "atoll.fullname" .)) .Values.webhook.tls.existingSecret }}
{{- end -}}

{{/* The Karmada kubeconfig Secret of a component ("" = in-cluster credentials of its ServiceAccount).
     Call with (list $ "controller") or (list $ "webhook"). */}}
{{- define "atoll.kubeconfigSecret" -}}
{{- $root := index . 0 -}}{{- $c := index $root.Values (index . 1) -}}
{{ default $root.Values.karmada.kubeconfigSecret $c.kubeconfigSecret }}
{{- end -}}

{{/* Pod-level fields shared by both Deployments. Call with (list $ "controller"|"webhook"). */}}
{{- define "atoll.podMeta" -}}
{{- $root := index . 0 -}}{{- $name := index . 1 -}}
labels: {{- include "atoll.labels" $root | nindent 2 }}
  app.kubernetes.io/component: {{ $name }}
  {{- with $root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $root.Values.podAnnotations }}
annotations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "atoll.podCommon" -}}
{{- $root := index . 0 -}}{{- $name := index . 1 -}}
{{- $secret := include "atoll.kubeconfigSecret" . -}}
serviceAccountName: {{ ternary (include "atoll.controllerServiceAccount" $root) (include "atoll.webhookServiceAccount" $root) (eq $name "controller") }}
{{- /* With a Karmada kubeconfig the pod never calls its own cluster's API: no token is mounted. */}}
automountServiceAccountToken: {{ not $secret }}
{{- with $root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
securityContext: {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with $root.Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* initContainer installing plugins.packages into the shared plugins volume (on PYTHONPATH). --no-deps: atoll
     and its dependencies are in the image (a plugin's `atoll` requirement must not fetch another copy onto
     PYTHONPATH, ahead of the image's); a plugin's other dependencies are listed in plugins.packages too. */}}
{{- define "atoll.pluginInit" -}}
{{- $root := . -}}
{{- if $root.Values.plugins.packages }}
initContainers:
  - name: install-plugins
    image: {{ include "atoll.image" $root }}
    imagePullPolicy: {{ $root.Values.image.pullPolicy }}
    command: ["python", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check", "--no-deps",
              "--constraint", "/etc/atoll/constraints.txt", "--target", "/opt/atoll/plugins"]
    args: {{- toYaml (concat $root.Values.plugins.pipArgs $root.Values.plugins.packages) | nindent 6 }}
    env:
      - {name: HOME, value: /tmp}
    securityContext: {{- toYaml $root.Values.securityContext | nindent 6 }}
    resources: {{- toYaml $root.Values.plugins.resources | nindent 6 }}
    volumeMounts:
      - {name: plugins, mountPath: /opt/atoll/plugins}
      - {name: tmp, mountPath: /tmp}
{{- end }}
{{- end -}}

{{- define "atoll.containerEnv" -}}
{{- $root := index . 0 -}}{{- $c := index $root.Values (index . 1) -}}
{{- if or $root.Values.plugins.packages $c.extraEnv (eq (index . 1) "controller") }}
env:
  {{- if eq (index . 1) "controller" }}
  - name: POD_NAME
    valueFrom: {fieldRef: {fieldPath: metadata.name}}
  {{- end }}
  {{- if $root.Values.plugins.packages }}
  - {name: PYTHONPATH, value: /opt/atoll/plugins}
  {{- end }}
  {{- with $c.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* Volumes: kubeconfig Secret, /tmp, plugins, extras. Call with (list $ "controller"|"webhook"). */}}
{{- define "atoll.volumes" -}}
{{- $root := index . 0 -}}{{- $c := index $root.Values (index . 1) -}}
{{- $secret := include "atoll.kubeconfigSecret" . -}}
{{- if $secret }}
- name: karmada-kubeconfig
  secret:
    secretName: {{ $secret }}
{{- end }}
- {name: tmp, emptyDir: {}}
{{- if $root.Values.plugins.packages }}
- {name: plugins, emptyDir: {}}
{{- end }}
{{- with $c.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "atoll.volumeMounts" -}}
{{- $root := index . 0 -}}{{- $c := index $root.Values (index . 1) -}}
{{- if include "atoll.kubeconfigSecret" . }}
- name: karmada-kubeconfig
  mountPath: /etc/atoll/karmada
  readOnly: true
{{- end }}
- {name: tmp, mountPath: /tmp}
{{- if $root.Values.plugins.packages }}
- {name: plugins, mountPath: /opt/atoll/plugins, readOnly: true}
{{- end }}
{{- with $c.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "atoll.kubeconfigArg" -}}
{{- if include "atoll.kubeconfigSecret" . }}
- --kubeconfig=/etc/atoll/karmada/{{ (index . 0).Values.karmada.kubeconfigKey }}
{{- end }}
{{- end -}}
