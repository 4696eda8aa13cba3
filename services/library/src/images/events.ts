import { ImageDeleted, ImageStored } from '@imagegen/contracts/events/v1/events';
import { type Sql, subjectFor, type TransactionSql, writeOutbox } from '@imagegen/platform';

/** The stored bytes of one image (or product image) as both events describe them. */
interface StoredBytes {
  tenantId: string;
  imageId: number;
  sizeBytes: number;
  thumbnailSizeBytes: number;
  createdAt: Date;
}

/** What ImageStored says of an image. */
export type StoredImage = StoredBytes & { modelId: string; operation: string; sessionId: string; keyType: string };

export const imageStoredSubject = (eventsPrefix: string) => subjectFor(eventsPrefix, 'library.image_stored');

/** ImageStored's payload. */
export function imageStoredData(image: StoredImage): Uint8Array {
  return ImageStored.encode({
    tenantId: image.tenantId,
    imageId: image.imageId,
    sizeBytes: image.sizeBytes,
    thumbnailSizeBytes: image.thumbnailSizeBytes,
    modelId: image.modelId,
    operation: image.operation,
    sessionId: image.sessionId,
    occurredAt: image.createdAt.toISOString(),
    keyType: image.keyType,
  }).finish();
}

/** ImageStored in the outbox of the transaction that inserted the row (usage metering bills it). */
export function writeImageStored(tx: Sql | TransactionSql, eventsPrefix: string, image: StoredImage): Promise<string> {
  return writeOutbox(tx, { subject: imageStoredSubject(eventsPrefix), data: imageStoredData(image) });
}

/** ImageDeleted in the outbox of the transaction that deleted the row. */
export function writeImageDeleted(tx: TransactionSql, eventsPrefix: string, image: StoredBytes): Promise<string> {
  return writeOutbox(tx, {
    subject: subjectFor(eventsPrefix, 'library.image_deleted'),
    data: ImageDeleted.encode({
      tenantId: image.tenantId,
      imageId: image.imageId,
      sizeBytes: image.sizeBytes,
      thumbnailSizeBytes: image.thumbnailSizeBytes,
      occurredAt: new Date().toISOString(),
      storedAt: image.createdAt.toISOString(),
    }).finish(),
  });
}
