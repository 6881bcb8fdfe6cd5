r"""CoLR's headline cell on a second dataset: Amazon Beauty, leave-one-out (HR@10).
Its flags and what it runs: experiments/papers/colr_beauty.py."""

from experiments.papers import colr_beauty
from launch import common

main = colr_beauty.main

if __name__ == '__main__':
  common.run(main)
