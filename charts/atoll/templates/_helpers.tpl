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

{{- define "atoll.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ default (include "atoll.fullname" .) .Values.serviceAccount.name }}
{{- else -}}{{ default "default" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}

{{- define "atoll.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
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

{{/* Karmada kubeconfig volume + mount + flag, shared by both Deployments. */}}
{{- define "atoll.kubeconfigVolume" -}}
{{- if .Values.karmada.kubeconfigSecret }}
- name: karmada-kubeconfig
  secret:
    secretName: {{ .Values.karmada.kubeconfigSecret }}
{{- end }}
{{- end -}}
{{- define "atoll.kubeconfigMount" -}}
{{- if .Values.karmada.kubeconfigSecret }}
- name: karmada-kubeconfig
  mountPath: /etc/atoll/karmada
  readOnly: true
{{- end }}
{{- end -}}
{{- define "atoll.kubeconfigArg" -}}
{{- if .Values.karmada.kubeconfigSecret }}
- --kubeconfig=/etc/atoll/karmada/{{ .Values.karmada.kubeconfigKey }}
{{- end }}
{{- end -}}
