"""The files that run on the nodes, shipped as package data and staged flat into one S3 asset.

``boot/``: the bootstrap (the nodes' user data and ParallelCluster's OnNodeConfigured script) and
the boot steps; ``pcluster/``: ParallelCluster hooks; ``slurm/``: Slurm job templates;
``bench_parse.py``: the benchmark parser the leader runs (a module here so tests import it).
"""
