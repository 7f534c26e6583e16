#!/usr/bin/env python3
#SBATCH --job-name=pyjob
#SBATCH --ntasks=1
#SBATCH --mem=1G
#SBATCH --export=ALL,RUN_MODE=eval
#CORPUS expect: ^python says job \d+ named pyjob mode=eval$
import os
print("python says job %s named %s mode=%s" % (os.environ["SLURM_JOB_ID"], os.environ["SLURM_JOB_NAME"], os.environ["RUN_MODE"]))
