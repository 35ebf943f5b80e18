{{/* Names and labels shared by every object of the chart. */}}

{{- define "leasehold.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
fullnameOverride, else the release name with the name (nameOverride or the
chart's) appended unless it already contains it.
*/}}
{{- define "leasehold.fullname" -}}
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

{{- define "leasehold.selectorLabels" -}}
app.kubernetes.io/name: {{ include "leasehold.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "leasehold.labels" -}}
{{ include "leasehold.selectorLabels" . }}
app.kubernetes.io/part-of: leasehold
app.kubernetes.io/component: controller
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The ServiceAccount the controller runs as. An existing one must be named: the
chart binds its RBAC to it and exempts it in the admission policy, so falling
back to the namespace's "default" ServiceAccount would hand those rights to
every pod there.
*/}}
{{- define "leasehold.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "leasehold.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: name the existing ServiceAccount the controller runs as (serviceAccount.create is false)" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The controller's user name in requests (admission, audit). */}}
{{- define "leasehold.controllerUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "leasehold.serviceAccountName" .) -}}
{{- end -}}

{{/* Namespaces whose Secrets the controller may get: secretNamespaces, or the release namespace. */}}
{{- define "leasehold.secretNamespaces" -}}
{{- $list := .Values.secretNamespaces | default (list .Release.Namespace) -}}
{{- toJson (uniq $list) -}}
{{- end -}}

{{/*
Rules on namespaced Leasehold objects: in the ClusterRole when Leases
are watched in every namespace, a Role in watchNamespace otherwise. Each verb
is one the controller sends (see README, "Install with Helm").
*/}}
{{- define "leasehold.leaseRules" -}}
# Informer (list+watch), fresh read before an intent write (get), the
# installation stamp (annotation leasehold.dev/installation) and finalizer
# leasehold.dev/release written with a merge patch (patch), ended Leases
# pruned past 32 per namespace or 7 days (delete).
- apiGroups: ["leasehold.dev"]
  resources: ["leases"]
  verbs: ["get", "list", "watch", "patch", "delete"]
# Status written with a merge patch on the status subresource.
- apiGroups: ["leasehold.dev"]
  resources: ["leases/status"]
  verbs: ["patch"]
# PeerFleets: informer (list+watch), and status (verdict; with lending also
# hosts, plan and accounting) written with a merge patch on the status
# subresource. Their credential and CA Secrets are read by name in
# secretNamespaces.
- apiGroups: ["leasehold.dev"]
  resources: ["peerfleets"]
  verbs: ["list", "watch"]
- apiGroups: ["leasehold.dev"]
  resources: ["peerfleets/status"]
  verbs: ["patch"]
# RunnerTargets: informer (list+watch), a fresh read at the start of each
# check (get), the finalizer leasehold.dev/runner-hosts added and removed
# with a merge patch (patch), and status (receipts, hosts, plan) written with
# a merge patch on the status subresource, each receipt before its provider call.
- apiGroups: ["leasehold.dev"]
  resources: ["runnertargets"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["leasehold.dev"]
  resources: ["runnertargets/status"]
  verbs: ["patch"]
{{- end -}}

{{/*
PeerFleet lending's rules in the namespaces of PeerFleets, with leaseRules:
in the ClusterRole when PeerFleets are watched in every namespace, a Role in
watchNamespace otherwise; none with peerFleet.enabled false (the controller
then runs with --no-peer-lending: PeerFleets report readiness only).
*/}}
{{- define "leasehold.peerFleetRules" -}}
# The finalizer leasehold.dev/peer-lending, added and removed with a merge
# patch, so a deleted PeerFleet stays until its mirror Jobs have finished
# and their status reached the peer.
- apiGroups: ["leasehold.dev"]
  resources: ["peerfleets"]
  verbs: ["patch"]
# Mirror Jobs (label leasehold.dev/peerfleet, named after the peer Job's
# uid): informer (list+watch), read by name so a restart finds the one it
# made (get), made from a claimed peer Job (create), and deleted once
# finished and their final status has reached the peer (delete). A running
# mirror is never deleted, so a peer Job is never cut off.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "delete"]
# The ServiceAccount leasehold-peer-job every mirror pod runs as: no token
# mounted, no bindings. Read, and made the first time; never updated.
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "create"]
# NetworkPolicies where mirrors run (informer, read only): a PeerFleet lends
# only while one denies the mirrors' egress by default.
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["list", "watch"]
{{- end -}}

{{/*
NODE_OPTIONS: the nodeOptions value, and --max-old-space-size at three
quarters of the container's memory limit unless nodeOptions sets it. Node's
own heap limit follows the machine's memory, not the container's: without
this, the heap grows past the limit and the container is killed instead of
collecting garbage. Limits in Gi, Mi, G, M or plain bytes are understood.
*/}}
{{- define "leasehold.nodeOptions" -}}
{{- $opts := .Values.nodeOptions | default "" -}}
{{- $limit := "" -}}
{{- with .Values.resources }}{{ with .limits }}{{ with .memory }}{{ $limit = toString . }}{{ end }}{{ end }}{{ end -}}
{{- $mib := 0 -}}
{{- if regexMatch "^[0-9]+Gi$" $limit }}{{ $mib = mul (trimSuffix "Gi" $limit | int64) 1024 }}
{{- else if regexMatch "^[0-9]+Mi$" $limit }}{{ $mib = trimSuffix "Mi" $limit | int64 }}
{{- else if regexMatch "^[0-9]+G$" $limit }}{{ $mib = div (mul (trimSuffix "G" $limit | int64) 1000000000) 1048576 }}
{{- else if regexMatch "^[0-9]+M$" $limit }}{{ $mib = div (mul (trimSuffix "M" $limit | int64) 1000000) 1048576 }}
{{- else if regexMatch "^[0-9]+$" $limit }}{{ $mib = div ($limit | int64) 1048576 }}
{{- end -}}
{{- $heap := "" -}}
{{- if and (gt (int64 $mib) 0) (not (contains "max-old-space-size" $opts)) }}{{ $heap = printf "--max-old-space-size=%d" (div (mul $mib 3) 4) }}{{ end -}}
{{- trim (printf "%s %s" $opts $heap) -}}
{{- end -}}
