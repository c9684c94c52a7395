#!/bin/sh
# wc.sh FILE — prints the number of words in FILE.
set -- $(cat "$1")
echo $#
