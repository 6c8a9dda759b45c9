export { matchesMetadataFilter } from './evaluate';
export {
  type FieldCondition,
  type FilterPath,
  type FilterScalar,
  filterLimits,
  type MetadataFilter,
  type PathStep,
  parseMetadataFilter,
} from './parse';
export { compileMetadataFilter } from './sql';
