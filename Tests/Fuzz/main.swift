// Fuzz targets: see `make fuzz` (issue 7). Placeholder until the targets land.
print("tokenstore-fuzz: not implemented yet")
