# Runs cmake/embed.cmake (IN, OUT, SYMBOL; EMBED = its path), then appends
# `const unsigned long SYMBOL_size` = the byte count of IN (without the NUL).
include(${EMBED})
file(SIZE ${IN} size)
file(APPEND ${OUT} "const unsigned long ${SYMBOL}_size = ${size}ul;\n")
