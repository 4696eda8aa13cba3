import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Vitest's own order (unknown and larger files first, then failed and longer ones), with the container image's
 * test last: .ci/run builds the image beside the suite, and that file waits for the build's result, so it must
 * not hold a worker while the build still runs.
 */
export default class ImageTestLast extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const last = (f: TestSpecification) => f.moduleId.endsWith('test/deploy/image.test.ts');
    return [...sorted.filter((f) => !last(f)), ...sorted.filter(last)];
  }
}
