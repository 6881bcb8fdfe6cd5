r"""Cross-paper combinations against their parts alone, with a popularity row.
Its flags and what it runs: experiments/papers/combinations.py."""

from experiments.papers import combinations
from launch import common

main = combinations.main

if __name__ == '__main__':
  common.run(main)
