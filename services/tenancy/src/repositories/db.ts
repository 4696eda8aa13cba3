import type { Sql, TransactionSql } from '@imagegen/platform';

/** The pool or a transaction: every repository function runs on either. */
export type Db = Sql | TransactionSql;
