"""The Slurm backend: a job attempt as one Slurm job on a site's cluster (``backend``), its
batch script and task wrapper (``script``), Slurm's client commands (``commands``) and its
states and reasons in words (``states``)."""
