"""Job kinds, one adapter each behind one interface (``job_kind``: the interface, the PyTorchJob adapter and
the registry; ``jobset_trainjob``: JobSet and Kubeflow Trainer v2 TrainJob), and the ranks of a job:
``torchrun_ranks`` (a pod's global ranks as torchrun reads them) and ``rank_layout`` (what a spec tells).

Pure: may import the shared base and ``detect.job_failure``; no kopf, kubernetes, boto3, nor adapters.
"""
