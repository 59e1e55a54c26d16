"""``narwhal-report --compare A B``: two deployments on one page. ``narwhal_trial``'s comparison
read with its two sides' runs and edges, the verdict table at the top, both sides' TTFT and TPOT
distributions overlaid, attainment against rate with both edges' brackets, and the engines' fit
ratios."""
