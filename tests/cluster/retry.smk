# A job that needs 300 MB but asks for 200 MB on its first attempt, doubling per attempt like the
# workflow's rules (common.smk: mem_mb). tests/test_slurm.py runs it with the SLURM profile to check
# that a failed job is resubmitted and that the larger request of the next attempt reaches sbatch.
# The job reads what SLURM granted it (scontrol), not what Snakemake computed.


rule all:
    input:
        "granted_mb.txt",
    default_target: True


rule needs_memory:
    output:
        "granted_mb.txt",
    log:
        "logs/needs_memory.log",
    resources:
        mem_mb=lambda wildcards, attempt: 200 * 2 ** (attempt - 1),
        runtime=2,
    shell:
        """
        granted=$(scontrol show job "$SLURM_JOB_ID" | grep -o 'MinMemoryNode=[0-9]*' | cut -d= -f2)
        echo "attempt granted ${{granted}} MB" >> {log}
        test "$granted" -ge 300
        echo "$granted" > {output}
        """
