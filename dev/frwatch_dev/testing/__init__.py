"""What the tests share, one home each: the poller (``polling``), ``frwatch operator`` and ``frwatch agent``
as subprocesses (``operator_process``, ``agent_process``), AdmissionReviews (``admission``), CRDs in the
emulator (``crds``), the webhook served on a thread (``webhook_thread``) and Debian's chromium driven by
playwright for the HTML report (``browser``). The port finder, which the local
cluster and the workloads use too, is ``frwatch_dev.ports``."""
