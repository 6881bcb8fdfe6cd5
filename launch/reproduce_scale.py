r"""Large populations on Amazon Beauty: round time, memory and its slope, metric.
Its flags and what it runs: experiments/papers/scale.py."""

from experiments.papers import scale
from launch import common

main = scale.main

if __name__ == '__main__':
  common.run(main)
