"""Real torch gloo training workloads that fail the way training jobs fail, producing real Flight Recorder dumps.

- `scenarios`: the named faults (torch-free, so launchers and tests can list them cheaply).
- `faulty_training`: the training script, one process per rank (`python -m ...faulty_training --scenario X`).
- `dump_on_failure`: NCCL's "every rank dumps on a timeout" imitated for gloo (flag file + TCPStore key).
- `local_launch`: run one job as local processes on loopback (`run_local_job`, and a CLI); its ranks are
  forked by `rank_zygote` (one torch import a job, through `forked_ranks`) unless `FRWATCH_RANKS_SPAWN=1`.

Nothing here is imported by the operator: only `faulty_training`, `dump_on_failure` and `rank_zygote`
import torch.
"""

#: A pod's command that runs the failing training script (``--scenario X`` and more after it).
WORKLOAD = ["python", "-m", "frwatch_dev.workloads.faulty_training"]
#: The same script under real torchrun (``torch.distributed.run``), several ranks per pod: torchrun takes
#: ``--nnodes``/``--nproc-per-node``/``--node-rank``/``--master-addr``/``--master-port`` from the ``PET_*`` env
#: Trainer v2's torch plugin sets (or a JobSet's template), and starts ``nproc`` ranks, each with its global
#: ``RANK``; each dumps under its global rank. Script options (``--scenario X``) go after it.
TORCHRUN_WORKLOAD = ["python", "-m", "torch.distributed.run", "-m", "frwatch_dev.workloads.faulty_training"]
#: A pod's command that trains, then dumps on demand when the agent asks (``on_demand``).
ON_DEMAND = ["python", "-m", "frwatch_dev.workloads.on_demand"]
#: A pod's command that fabricates the dump a hung GPU leaves (the demo's hardware scenario, example 03).
GPU_HANG = ["python", "-m", "frwatch_dev.demo.gpu_hang"]
