"""`logwatch plot`: the points of a run within the image's pixels, drawn in a process of their own."""
