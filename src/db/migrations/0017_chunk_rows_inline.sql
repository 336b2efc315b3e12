-- A chunk row (about 1,500 characters of text and a 256-dimension vector) is above the 2 KB at
-- which PostgreSQL first tries to compress its text and then moves it to the TOAST table: a
-- failed pglz pass, a second heap insert and a TOAST index insert per chunk while filling, and a
-- TOAST index lookup per result when a search reads its rows. Rows now stay whole up to a page;
-- larger text is still moved out. Rows written before keep their TOAST values.
ALTER TABLE "document_chunks" SET (toast_tuple_target = 8160);
