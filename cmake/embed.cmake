# Writes OUT: a C file defining `const char SYMBOL[]` with the bytes of IN
# and a terminating NUL. Run with cmake -P.
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT} "/* generated from ${IN} */\nconst char ${SYMBOL}[] = {${bytes}0x00};\n")
