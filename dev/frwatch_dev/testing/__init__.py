"""What the tests share: the poller (``polling``), ``frwatch operator`` as a subprocess
(``operator_process``) and the webhook served on a thread (``webhook_thread``); the port finder is
``frwatch_dev.ports``."""
