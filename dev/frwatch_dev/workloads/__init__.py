"""Real torch gloo training workloads that fail the way training jobs fail, producing real Flight Recorder dumps.

- `scenarios`: the named faults (torch-free, so launchers and tests can list them cheaply).
- `faulty_training`: the training script, one process per rank (`python -m ...faulty_training --scenario X`).
- `dump_on_failure`: NCCL's "every rank dumps on a timeout" imitated for gloo (flag file + TCPStore key).
- `local_launch`: run one job as local processes on loopback (`run_local_job`, and a CLI).

Nothing here is imported by the operator: only `faulty_training` and `dump_on_failure` import torch.
"""
