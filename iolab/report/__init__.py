"""What readers see: the numbers for the paper, the plotting style, figure
outputs with their manifest, and the paper's assembly."""
