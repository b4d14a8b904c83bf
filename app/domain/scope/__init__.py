"""The maintainer's scope decision on a review's proposals (`decision`) and the acceptance
criteria in a card body it reads and rewrites (`acceptance`). Pure."""
