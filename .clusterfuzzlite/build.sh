#!/bin/bash -eu
# Builds every target of fuzz/ with the sanitizer ClusterFuzzLite/OSS-Fuzz asks for (the base
# image's cargo wrapper passes it), and ships each with its dictionary, options and seed corpus.
cd "$SRC/conform/fuzz"
cargo fuzz build -O
release=target/x86_64-unknown-linux-gnu/release
for target in $(cargo fuzz list); do
  cp "$release/$target" "$OUT/"
  case "$target" in
    parse | roundtrip) dict=dicts/all.dict ;;
    *) dict=dicts/$target.dict ;;
  esac
  cp "$dict" "$OUT/$target.dict"
  printf '[libfuzzer]\nmax_len = 4096\ndict = %s.dict\n' "$target" > "$OUT/$target.options"
  if [ -d "seeds/$target" ]; then
    zip -q -j "$OUT/${target}_seed_corpus.zip" "seeds/$target"/*
  fi
done
