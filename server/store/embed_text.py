#!/usr/bin/env python3
# Writes a C++ header holding a text file as a std::string_view constant (the SQL schema).
import sys

source, output, name = sys.argv[1:4]
text = open(source, encoding="utf-8").read()
delimiter = "tessera_embedded"
assert ")" + delimiter not in text
with open(output, "w", encoding="utf-8") as header:
    header.write("// Generated from " + source.split("/")[-1] + " by embed_text.py; do not edit.\n")
    header.write("#pragma once\n#include <string_view>\n")
    header.write(f'inline constexpr std::string_view {name} = R"{delimiter}({text}){delimiter}";\n')
