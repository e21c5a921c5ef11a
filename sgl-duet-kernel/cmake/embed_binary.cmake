# Writes the bytes of IN as a C array NAME into OUT.  Usage:
#   cmake -DIN=file.fatbin -DOUT=file.c -DNAME=symbol -P embed_binary.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" nchars)
math(EXPR nbytes "${nchars} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n"
       bytes "${bytes}")
file(WRITE "${OUT}"
  "/* Generated from ${IN} by embed_binary.cmake; do not edit. */\n"
  "#include <stddef.h>\n"
  "__attribute__((aligned(64))) const unsigned char ${NAME}[${nbytes}] = {\n${bytes}\n};\n"
  "const size_t ${NAME}_size = ${nbytes};\n")
