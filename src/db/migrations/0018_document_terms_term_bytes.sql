-- Terms compare byte by byte: under a libc collation (the server's C.UTF-8 included) each
-- comparison of the key went through strcoll on copies of both strings and sorts had no
-- abbreviated keys, for about 18 term rows per chunk written. Lexemes are only ever looked up by
-- equality, and C.UTF-8 orders as "C" does, so no result changes. The key is rebuilt.
ALTER TABLE "document_terms" ALTER COLUMN "term" SET DATA TYPE text COLLATE "C";
